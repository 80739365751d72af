import Foundation
import Prometheus
import Testing
@testable import BridgeRuntime

/// The process figures of the metrics endpoint, read from /proc (proc(5)).
@Suite struct ProcessMetricsTests {
    /// Fields are counted after the last `)`: a process name may hold spaces and parentheses.
    @Test func statLineWithAnAwkwardName() throws {
        let line = "4242 (gatt (2) mqtt) S 1 4242 4242 0 -1 4194560 1939 0 0 0 250 75 0 0 20 0 9 0 1500 0 0 0"
        let stat = try #require(ProcessStat.parse(stat: line, bootTime: 1_700_000_000, ticksPerSecond: 100))
        #expect(stat.cpuSeconds == 3.25)  // (250 + 75) / 100
        #expect(stat.startTime == 1_700_000_015)  // boot + 1500 / 100
        #expect(ProcessStat.parse(stat: "4242 (short) S 1 2", bootTime: 0, ticksPerSecond: 100) == nil)
        #expect(ProcessStat.parse(stat: line, bootTime: nil, ticksPerSecond: 100)?.startTime == nil)
    }

    /// The boot time comes from the clocks, not /proc/stat (which the systemd unit's
    /// ProcSubset=pid hides): it agrees with /proc/stat's btime where that can be read.
    @Test func bootTimeFromTheClocks() throws {
        let boot = try #require(ProcessStat.bootTime())
        #expect(boot < Date().timeIntervalSince1970)
        if let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }), let btime = Double(line.dropFirst(6)) {
            #expect(abs(boot - btime) < 2, "clocks: \(boot), /proc/stat: \(btime)")
        }
        let start = try #require(ProcessStat.read()?.startTime)
        #expect(start <= Date().timeIntervalSince1970 + 1 && start > Date().timeIntervalSince1970 - 3600)
    }

    /// The samples of a text exposition: name → value.
    static func samples(_ registry: PrometheusCollectorRegistry) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in registry.emitToString().split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let v = Double(parts[1]) { out[String(parts[0])] = v }
        }
        return out
    }

    /// This test process' own figures, as a scrape exposes them (a registry of the test's own: no
    /// global bootstrap).
    @Test func ownFiguresInTheExposition() throws {
        let registry = PrometheusCollectorRegistry()
        let process = ProcessMetrics(registry: registry)
        var burn = 0.0
        for i in 0..<2_000_000 { burn += Double(i).squareRoot() }
        #expect(burn > 0)
        process.update()
        let first = Self.samples(registry)
        #expect((first["process_resident_memory_bytes"] ?? 0) > 1_000_000)
        #expect((first["process_cpu_seconds_total"] ?? 0) > 0)
        #expect((first["process_start_time_seconds"] ?? 0) > 1_600_000_000)
        // The counter follows the process' CPU time: it only moves up.
        process.update()
        #expect((Self.samples(registry)["process_cpu_seconds_total"] ?? 0) >= first["process_cpu_seconds_total"] ?? 0)
    }
}

/// The endpoint's answers, without sockets (a registry of the test's own).
@Suite struct MetricsHandlerTests {
    let handler: MetricsHandler = {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(descriptor: MetricNameDescriptor(metricName: "gatt2mqtt_test", unitName: "total", helpText: "A test.")).increment(by: Int64(3))
        return MetricsHandler(registry: registry, process: ProcessMetrics(registry: registry))
    }()

    func answer(_ head: String) -> (status: String, text: String) {
        let text = String(decoding: handler.response(to: Array(head.utf8)).bytes, as: UTF8.self)
        return (text.components(separatedBy: "\r\n")[0], text)
    }

    @Test func metricsAndTheOtherAnswers() {
        let ok = answer("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(ok.status == "HTTP/1.1 200 OK")
        #expect(ok.text.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        #expect(ok.text.contains("Connection: close\r\n"))
        #expect(ok.text.contains("\ngatt2mqtt_test_total 3\n"))
        #expect(ok.text.contains("\nprocess_resident_memory_bytes "))
        let body = ok.text.components(separatedBy: "\r\n\r\n")[1]
        #expect(ok.text.contains("Content-Length: \(body.utf8.count)\r\n"))
        #expect(answer("GET /metrics?name=x HTTP/1.0\r\n\r\n").status == "HTTP/1.1 200 OK")
        let head = answer("HEAD /metrics HTTP/1.1\r\n\r\n")
        #expect(head.status == "HTTP/1.1 200 OK" && head.text.hasSuffix("\r\n\r\n") && !head.text.contains("gatt2mqtt_test"))
        #expect(!head.text.contains("Content-Length: 0\r\n"), "HEAD says the GET's length")
        #expect(answer("GET / HTTP/1.1\r\n\r\n").status == "HTTP/1.1 404 Not Found")
        #expect(answer("GET /metrics/x HTTP/1.1\r\n\r\n").status == "HTTP/1.1 404 Not Found")
        let post = answer("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        #expect(post.status == "HTTP/1.1 405 Method Not Allowed" && post.text.contains("Allow: GET, HEAD\r\n"))
        for bad in ["garbage\r\n\r\n", "GET /metrics\r\n\r\n", "GET metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2\r\n\r\n", ""] {
            #expect(answer(bad).status == "HTTP/1.1 400 Bad Request", "\(bad.debugDescription)")
        }
    }

    @Test func endOfHead() {
        #expect(MetricsHandler.endOfHead(Array("GET / HTTP/1.1\r\n\r\nrest".utf8)) == 18)
        #expect(MetricsHandler.endOfHead(Array("GET / HTTP/1.1\r\nHost: x\r\n".utf8)) == nil)
        #expect(MetricsHandler.endOfHead(Array("\r\n\r".utf8)) == nil)
    }
}
