import BinaryCoding
import BridgeConfig
import BridgeCore
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
@testable import BridgeRuntime

/// The web frontend's HTTP side (docs/frontend.md): request parsing, SSE framing, the hub's
/// snapshot and replay, the routes (auth, request and command injection, errors), and one event
/// stream over a real socket. The pages themselves are tested in a browser (Tests/Browser).
@Suite struct FrontendTests {
    static let token = "token-1234567890"

    /// A hub whose "bridge" records what it is handed and answers requests with `answer`.
    final class Received: Sendable {
        let messages = Mutex<[InboundMessage]>([])
        func withLock<T>(_ body: (inout [InboundMessage]) -> T) -> T { messages.withLock { body(&$0) } }
    }

    static func hub(answer: String = #"{"status":"ok","data":{}}"#) -> (FrontendHub, Received) {
        let hub = FrontendHub(baseTopic: "gatt2mqtt")
        let received = Received()
        hub.attach { [weak hub] m in
            received.withLock { $0.append(m) }
            if let topic = m.responseTopic {
                hub?.observe(OutboundMessage(topic: topic, payload: Array(answer.utf8), qos: 1, retain: false))
            }
        }
        hub.observe(OutboundMessage(topic: "gatt2mqtt/bridge/devices", payload: Array(#"[{"id":"camera"}]"#.utf8), qos: 1, retain: true))
        return (hub, received)
    }

    static func request(_ method: String, _ target: String, headers: [String] = [], body: String = "") throws -> HTTPRequest {
        let head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n"
        var r = try HTTPRequest.parse(head: Array(head.utf8))
        r.body = Array(body.utf8)
        return r
    }

    static func response(_ outcome: FrontendRouter.Outcome) -> HTTPResponse? {
        if case let .response(r) = outcome { return r }
        return nil
    }

    static func body(_ r: HTTPResponse?) -> String { String(decoding: r?.body ?? [], as: UTF8.self) }

    // MARK: HTTP and SSE

    @Test func parsesARequestHead() throws {
        let r = try Self.request("GET", "/api/events?token=a%2Fb+c&x", headers: ["Cookie: a=1; gatt2mqtt_token=t0k", "Last-Event-ID: b-7"])
        #expect(r.method == "GET")
        #expect(r.path == "/api/events")
        #expect(r.query == ["token": "a/b c", "x": ""])
        #expect(r.cookies == ["a": "1", "gatt2mqtt_token": "t0k"])
        #expect(r.header("last-event-id") == "b-7")
    }

    @Test func refusesMalformedHeads() {
        #expect(throws: HTTPRequest.ParseError.malformed("expected an HTTP/1.x request line")) {
            try HTTPRequest.parse(head: Array("GET /\r\n\r\n".utf8))
        }
        #expect(throws: HTTPRequest.ParseError.malformed("malformed header line")) {
            try HTTPRequest.parse(head: Array("GET / HTTP/1.1\r\nno colon\r\n\r\n".utf8))
        }
        #expect(throws: HTTPRequest.ParseError.lengthRequired) {
            try HTTPRequest.parse(head: Array("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        }
        #expect(throws: HTTPRequest.ParseError.tooLarge) {
            try HTTPRequest.parse(head: Array("POST / HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n".utf8))
        }
    }

    @Test func sseFraming() {
        #expect(String(decoding: SSE.event("hello", id: "b-1", data: "a\nb"), as: UTF8.self) == "event: hello\nid: b-1\ndata: a\ndata: b\n\n")
        #expect(String(decoding: SSE.event(data: "{}"), as: UTF8.self) == "data: {}\n\n")
        #expect(String(decoding: SSE.comment("ping"), as: UTF8.self) == ": ping\n\n")
    }

    // MARK: The hub

    @Test func snapshotThenReplayAfterTheLastEvent() {
        let hub = FrontendHub(baseTopic: "gatt2mqtt")
        hub.observe(OutboundMessage(topic: "gatt2mqtt/camera", payload: Array(#"{"encoding":false}"#.utf8), qos: 1, retain: true))
        hub.observe(OutboundMessage(topic: "homeassistant/switch/x/config", payload: Array("{}".utf8), qos: 1, retain: true))
        hub.observe(OutboundMessage(topic: "gatt2mqtt/camera", payload: Array(#"{"encoding":true}"#.utf8), qos: 1, retain: true))
        hub.observe(OutboundMessage(topic: "gatt2mqtt/bridge/event", payload: Array(#"{"type":"a"}"#.utf8), qos: 0, retain: false))
        let first = hub.subscribe(lastEventID: nil)
        #expect(first.reset)
        // The newest retained value per topic, then the recent events, in publish order; not the
        // discovery topics.
        #expect(first.snapshot.map(\.topic) == ["gatt2mqtt/camera", "gatt2mqtt/bridge/event"])
        #expect(first.snapshot.first?.payload == Array(#"{"encoding":true}"#.utf8))
        hub.unsubscribe(first.id)

        let last = first.snapshot.last!.seq
        hub.observe(OutboundMessage(topic: "gatt2mqtt/camera", payload: [], qos: 1, retain: true))  // cleared
        hub.observe(OutboundMessage(topic: "gatt2mqtt/bridge/event", payload: Array(#"{"type":"b"}"#.utf8), qos: 0, retain: false))
        let again = hub.subscribe(lastEventID: "\(hub.boot)-\(last)")
        #expect(!again.reset)
        #expect(again.snapshot.map(\.topic) == ["gatt2mqtt/camera", "gatt2mqtt/bridge/event"])
        #expect(again.snapshot.first?.payload == [])  // the clearing is news to this page
        // Another process' id (a restart): reset, and a cleared topic is not in a full snapshot.
        let other = hub.subscribe(lastEventID: "00000000-\(last)")
        #expect(other.reset)
        #expect(other.snapshot.map(\.topic) == ["gatt2mqtt/bridge/event", "gatt2mqtt/bridge/event"])
    }

    /// Log lines go to the pages' log tail, in a ring of their own.
    @Test func logLinesForTheTail() async {
        let hub = FrontendHub(baseTopic: "gatt2mqtt")
        hub.observe(OutboundMessage(topic: "gatt2mqtt/bridge/event", payload: Array(#"{"type":"a"}"#.utf8), qos: 0, retain: false))
        for i in 0..<(FrontendHub.logLimit + 5) { hub.log(level: "info", message: "line \(i)") }
        let s = hub.subscribe(lastEventID: nil)
        #expect(s.snapshot.first?.topic == "gatt2mqtt/bridge/event")  // not pushed out by the log
        #expect(s.snapshot.count == 1 + FrontendHub.logLimit)
        #expect(s.snapshot.last.map { String(decoding: $0.payload, as: UTF8.self) } == #"{"level":"info","message":"line \#(FrontendHub.logLimit + 4)"}"#)
        hub.unsubscribe(s.id)
    }

    @Test func liveEventsAndRepliesThatNeverReachTheBroker() async {
        let hub = FrontendHub(baseTopic: "gatt2mqtt")
        let broker = FakeMQTT()
        let tee = FrontendTee(inner: broker, hub: hub)
        let s = hub.subscribe(lastEventID: nil)
        tee.send(OutboundMessage(topic: "gatt2mqtt/camera/response", payload: Array(#"{"status":"ok"}"#.utf8), qos: 1, retain: false))
        tee.send(OutboundMessage(topic: FrontendHub.replyPrefix + "x", payload: Array("{}".utf8), qos: 1, retain: false))
        hub.ping(s.id)
        let events = await collect(s.events, count: 2)
        guard case let .item(item)? = events.first else { Issue.record("no item: \(events)"); return }
        #expect(item.topic == "gatt2mqtt/camera/response")
        #expect(events.last == .ping)
        #expect(broker.sent.map(\.topic) == ["gatt2mqtt/camera/response"])
        hub.unsubscribe(s.id)
    }

    // MARK: Routes

    @Test func everythingNeedsTheTokenWhenOneIsSet() async throws {
        let (hub, received) = Self.hub()
        let router = FrontendRouter(hub: hub, token: Self.token, metrics: nil)
        for (method, path) in [("GET", "/"), ("GET", "/app.js"), ("GET", "/api/events"), ("GET", "/api/state"),
                               ("POST", "/api/request/info"), ("POST", "/api/devices/camera/set"), ("GET", "/nope")] {
            let r = Self.response(await router.route(try Self.request(method, path, body: "{}")))
            #expect(r?.status == 401, "\(method) \(path)")
            #expect(r?.header("WWW-Authenticate") == #"Bearer realm="gatt2mqtt""#)
        }
        #expect(Self.response(await router.route(try Self.request("GET", "/api/state", headers: ["Authorization: Bearer nope-nope"])))?.status == 401)
        #expect(received.withLock { $0 }.isEmpty)
        // Bearer, the cookie, the query.
        #expect(Self.response(await router.route(try Self.request("GET", "/api/state", headers: ["Authorization: Bearer \(Self.token)"])))?.status == 200)
        #expect(Self.response(await router.route(try Self.request("GET", "/app.js", headers: ["Cookie: gatt2mqtt_token=\(Self.token)"])))?.status == 200)
        guard case .events = await router.route(try Self.request("GET", "/api/events", headers: ["Cookie: gatt2mqtt_token=\(Self.token)"])) else {
            Issue.record("no event stream with the cookie")
            return
        }
        // The token in the address bar becomes an HttpOnly, SameSite=Strict cookie and leaves it.
        let login = Self.response(await router.route(try Self.request("GET", "/?token=\(Self.token)")))
        #expect(login?.status == 303)
        #expect(login?.header("Location") == "/")
        #expect(login?.header("Set-Cookie") == "gatt2mqtt_token=\(Self.token); Path=/; HttpOnly; SameSite=Strict")
    }

    /// `?token=` is taken on the page's address only (which turns it into the cookie), not on
    /// the event stream, the API, the assets or /metrics.
    @Test func tokenInTheAddressOnlyForThePage() async throws {
        let (hub, received) = Self.hub()
        let router = FrontendRouter(hub: hub, token: Self.token,
                                    metrics: MetricsHandler(registry: PrometheusBackend.registry, process: PrometheusBackend.process))
        for (method, path) in [("GET", "/api/events"), ("GET", "/api/state"), ("GET", "/metrics"), ("GET", "/app.js"), ("GET", "/index.html"),
                               ("POST", "/api/request/info"), ("POST", "/api/devices/camera/set")] {
            let r = Self.response(await router.route(try Self.request(method, "\(path)?token=\(Self.token)", body: "{}")))
            #expect(r?.status == 401, "\(method) \(path)?token=")
            #expect(Self.body(r).contains("?token= is accepted on the page's address"), "\(method) \(path)?token=")
        }
        #expect(received.withLock { $0 }.isEmpty)
        #expect(Self.response(await router.route(try Self.request("GET", "/?token=\(Self.token)")))?.status == 303)
    }

    @Test func noTokenConfiguredServesThePages() async throws {
        let (hub, _) = Self.hub()
        let router = FrontendRouter(hub: hub, token: nil, metrics: nil)
        let page = Self.response(await router.route(try Self.request("GET", "/")))
        #expect(page?.status == 200)
        #expect(page?.header("Content-Type") == "text/html; charset=utf-8")
        #expect(Self.body(page).contains("<script src=\"/app.js\""))
        #expect(page?.header("Content-Security-Policy")?.contains("default-src 'self'") == true)
    }

    @Test func requestsGoToTheBridgeAndTheAnswerComesBack() async throws {
        let (hub, received) = Self.hub(answer: #"{"status":"ok","data":{"version":"1"},"transaction":"t1"}"#)
        let router = FrontendRouter(hub: hub, token: nil, metrics: nil)
        let r = Self.response(await router.route(try Self.request("POST", "/api/request/device/remove", body: #"{"id":"x","transaction":"t1"}"#)))
        #expect(r?.status == 200)
        #expect(Self.body(r) == #"{"status":"ok","data":{"version":"1"},"transaction":"t1"}"#)
        let m = try #require(received.withLock { $0.first })
        #expect(m.topic == "gatt2mqtt/bridge/request/device/remove")
        #expect(m.payload == Array(#"{"id":"x","transaction":"t1"}"#.utf8))
        #expect(m.responseTopic?.hasPrefix(FrontendHub.replyPrefix) == true)

        // The bridge's refusal: 400 with its answer.
        let (refusing, _) = Self.hub(answer: #"{"status":"error","error":"invalid JSON: …"}"#)
        let bad = Self.response(await FrontendRouter(hub: refusing, token: nil, metrics: nil).route(try Self.request("POST", "/api/request/info", body: "{oops")))
        #expect(bad?.status == 400)
        #expect(Self.body(bad).contains("invalid JSON"))
    }

    @Test func commandsGetATransactionAndGoToTheDevicesTopics() async throws {
        let (hub, received) = Self.hub()
        let router = FrontendRouter(hub: hub, token: nil, metrics: nil)
        let r = Self.response(await router.route(try Self.request("POST", "/api/devices/camera/set", body: #"{"shutter":true}"#)))
        #expect(r?.status == 202)
        let answer = try #require(try JSONValue(parsing: Self.body(r)).objectValue)
        let transaction = try #require(answer["transaction"]?.stringValue)
        #expect(transaction.hasPrefix("web-"))
        let set = try #require(received.withLock { $0.last })
        #expect(set.topic == "gatt2mqtt/camera/set")
        #expect(try JSONValue(parsing: set.payload) == ["shutter": true, "transaction": .string(transaction)])

        // A transaction of the caller's own is kept; /get with no body reads nothing in particular.
        _ = await router.route(try Self.request("POST", "/api/devices/camera/set", body: #"{"shutter":false,"transaction":"mine"}"#))
        #expect(try JSONValue(parsing: received.withLock { $0.last!.payload })["transaction"] == "mine")
        #expect(Self.response(await router.route(try Self.request("POST", "/api/devices/camera/get")))?.status == 202)
        #expect(received.withLock { $0.last!.topic } == "gatt2mqtt/camera/get")
        #expect(Self.response(await router.route(try Self.request("POST", "/api/devices/camera/control/write", body: "01")))?.status == 202)
        #expect(received.withLock { $0.last! } == InboundMessage(topic: "gatt2mqtt/camera/control/write", payload: Array("01".utf8)))
        let count = received.withLock { $0.count }

        // Refused at the door, nothing handed to the bridge.
        let malformed = Self.response(await router.route(try Self.request("POST", "/api/devices/camera/set", body: "{oops")))
        #expect(malformed?.status == 400)
        #expect(Self.body(malformed).hasPrefix(#"{"error":"invalid JSON"#))
        #expect(Self.response(await router.route(try Self.request("POST", "/api/devices/camera/set", body: "7")))?.status == 400)
        #expect(Self.response(await router.route(try Self.request("POST", "/api/devices/nobody/set", body: "{}")))?.status == 404)
        #expect(Self.response(await router.route(try Self.request("POST", "/api/devices/ca%2Fm/set", body: "{}")))?.status == 400)
        #expect(Self.response(await router.route(try Self.request("GET", "/api/devices/camera/set")))?.status == 405)
        #expect(Self.response(await router.route(try Self.request("POST", "/api/devices/camera/explode", body: "{}")))?.status == 404)
        #expect(Self.response(await router.route(try Self.request("GET", "/nothing/here")))?.status == 404)
        #expect(Self.response(await router.route(try Self.request("DELETE", "/")))?.status == 405)
        #expect(received.withLock { $0.count } == count)
        // Another site's page may not post through the user's browser.
        let cross = Self.response(await router.route(try Self.request("POST", "/api/devices/camera/set", headers: ["Origin: http://evil.example"], body: "{}")))
        #expect(cross?.status == 403)
        #expect(received.withLock { $0.count } == count)
    }

    @Test func nothingToTalkToWhenTheBridgeIsNotRunning() async throws {
        let hub = FrontendHub(baseTopic: "gatt2mqtt")
        let router = FrontendRouter(hub: hub, token: nil, metrics: nil)
        #expect(Self.response(await router.route(try Self.request("POST", "/api/request/info")))?.status == 503)
        #expect(Self.response(await router.route(try Self.request("POST", "/api/devices/camera/set", body: "{}")))?.status == 503)
    }

    /// With `metrics` configured the frontend's listener serves /metrics too, behind the token.
    @Test func metricsBehindTheToken() async throws {
        let (hub, _) = Self.hub()
        let router = FrontendRouter(hub: hub, token: Self.token,
                                    metrics: MetricsHandler(registry: PrometheusBackend.registry, process: PrometheusBackend.process))
        #expect(Self.response(await router.route(try Self.request("GET", "/metrics")))?.status == 401)
        let scrape = Self.response(await router.route(try Self.request("GET", "/metrics", headers: ["Authorization: Bearer \(Self.token)"])))
        #expect(scrape?.status == 200)
        #expect(scrape?.header("Content-Type") == MetricsHandler.textFormat)
        #expect(Self.body(scrape).contains("process_resident_memory_bytes"))
        // Without metrics configured, /metrics is just another unknown path.
        let plain = FrontendRouter(hub: hub, token: nil, metrics: nil)
        #expect(Self.response(await plain.route(try Self.request("GET", "/metrics")))?.status == 404)
    }

    /// Whatever the address and the token, a request for a name the frontend does not answer to
    /// (DNS rebinding) is refused 421, and a state-changing one from a page of a foreign origin 403.
    @Test func hostAndOriginAllowList() async throws {
        let (hub, received) = Self.hub()
        for token in [nil, Self.token] {
            let router = FrontendRouter(hub: hub, token: token, metrics: nil,
                                        hosts: HostAllowList(listen: "192.168.1.20", allowed: ["bridge.example"]))
            let auth = token.map { ["Authorization: Bearer \($0)"] } ?? []
            for host in ["127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.0.0.2", "192.168.1.20:8080", "Bridge.Example:8080", "bridge.example."] {
                var r = try Self.request("GET", "/api/state", headers: auth)
                r.headers = r.headers.filter { $0.name != "host" } + [("host", host)]
                #expect(Self.response(await router.route(r))?.status == 200, "\(host)")
            }
            for host in ["evil.example:8080", "127.0.0.1.evil.example", "[::2]:8080", "bridge.example.evil.example", "192.168.1.21", "a:b:c", ""] {
                var r = try Self.request("GET", "/api/state", headers: auth)
                r.headers = r.headers.filter { $0.name != "host" } + [("host", host)]
                let refused = Self.response(await router.route(r))
                #expect(refused?.status == 421, "\(host)")
                #expect(Self.body(refused).contains("frontend.allowed_hosts"))
            }
            for origin in ["http://evil.example", "null", "http://bridge.example.evil.example:8080", "file://"] {
                let r = Self.response(await router.route(try Self.request("POST", "/api/request/info", headers: auth + ["Origin: \(origin)"])))
                #expect(r?.status == 403, "\(origin)")
            }
            for origin in ["http://bridge.example:8080", "https://bridge.example", "http://127.0.0.1:8080"] {
                let r = Self.response(await router.route(try Self.request("POST", "/api/request/info", headers: auth + ["Origin: \(origin)"])))
                #expect(r?.status == 200, "\(origin)")
            }
        }
        #expect(received.withLock { $0.count } == 6)
        // Listening on every address adds no name.
        #expect(HostAllowList(listen: "0.0.0.0", allowed: []) == .loopback)
        #expect(!HostAllowList(listen: "::", allowed: []).allows(host: "[::]:8080"))
        #expect(HostAllowList(listen: "fd00::1", allowed: []).allows(host: "[fd00::1]:8080"))
    }

    @Test func tokenFiles() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("frontend-token-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("good").path
        try " secret-token-1\n".write(toFile: good, atomically: true, encoding: .utf8)
        chmod(good, 0o600)
        #expect(try FrontendServer.readToken(good) == "secret-token-1")
        let short = dir.appendingPathComponent("short").path
        try "abc".write(toFile: short, atomically: true, encoding: .utf8)
        #expect(throws: FrontendServer.TokenError.self) { try FrontendServer.readToken(short) }
        let spaced = dir.appendingPathComponent("spaced").path
        try "two words here".write(toFile: spaced, atomically: true, encoding: .utf8)
        #expect(throws: FrontendServer.TokenError.self) { try FrontendServer.readToken(spaced) }
        #expect(throws: FrontendServer.TokenError.self) { try FrontendServer.readToken(dir.appendingPathComponent("missing").path) }
    }

    /// A token file others may read is refused, with the fix.
    @Test func tokenFileReadableByOthersIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("frontend-token-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("token").path
        try "secret-token-1\n".write(toFile: file, atomically: true, encoding: .utf8)
        for mode: mode_t in [0o644, 0o640, 0o604, 0o660] {
            chmod(file, mode)
            #expect(throws: FrontendServer.TokenError(description: "group or others may read or write it (mode \(String(mode, radix: 8))): chmod 600 \(file)")) {
                try FrontendServer.readToken(file)
            }
        }
        chmod(file, 0o400)
        #expect(try FrontendServer.readToken(file) == "secret-token-1")
        // The server does not start with it.
        chmod(file, 0o644)
        #expect(throws: StartupError.self) {
            try FrontendServer(settings: FrontendSettings(host: "127.0.0.1", port: try freeLoopbackPort(), authTokenFile: file), hub: FrontendHub(baseTopic: "gatt2mqtt"),
                               metrics: false, logger: Logger(label: "frontend-test"))
        }
    }

    /// Beyond loopback without a token the server does not start (the configuration refuses it
    /// too: FrontendConfigTests), unless told to serve it open.
    @Test func tokenRequiredBeyondLoopback() throws {
        #expect {
            try FrontendServer(settings: FrontendSettings(host: "0.0.0.0", port: try freeLoopbackPort()), hub: FrontendHub(baseTopic: "gatt2mqtt"),
                               metrics: false, logger: Logger(label: "frontend-test"))
        } throws: { error in
            "\(error)".contains("frontend.auth_token_file") && "\(error)".contains("frontend.allow_unauthenticated: true")
        }
    }

    // MARK: Over a socket

    /// Sends `request` to 127.0.0.1:`port` and reads until `until` is in the answer (or it ends).
    static func exchange(port: Int, _ request: String, until: String? = nil, then: (@Sendable () -> Void)? = nil, until2: String? = nil) -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard connectLoopback(fd, port: port) else { return "" }
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        var out = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var stage = 0
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            out += buffer[..<n]
            let text = String(decoding: out, as: UTF8.self)
            if stage == 0, let until, text.contains(until) {
                guard let then else { break }
                then()
                stage = 1
            }
            if stage == 1, let until2, text.contains(until2) { break }
        }
        return String(decoding: out, as: UTF8.self)
    }

    @Test(.timeLimit(.minutes(1))) func eventStreamOverASocket() async throws {
        let (hub, _) = Self.hub()
        hub.observe(OutboundMessage(topic: "gatt2mqtt/bridge/state", payload: Array(#"{"state":"online"}"#.utf8), qos: 1, retain: true))
        let port = try freeLoopbackPort()
        let server = try FrontendServer(settings: FrontendSettings(host: "127.0.0.1", port: port), hub: hub, metrics: false,
                                        logger: Logger(label: "frontend-test"))
        let group = ServiceGroup(configuration: .init(services: [server], logger: Logger(label: "frontend-test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let text = await offThePool {
                Self.exchange(port: port, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", until: "event: ready", then: {
                    hub.observe(OutboundMessage(topic: "gatt2mqtt/camera", payload: Array(#"{"encoding":true}"#.utf8), qos: 1, retain: true))
                }, until2: "encoding")
            }
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"))
            #expect(text.contains("retry: 2000\n\n"))
            #expect(text.contains("event: hello\ndata: {\"boot\":\"\(hub.boot)\",\"base\":\"gatt2mqtt\",\"reset\":true}\n\n"))
            #expect(text.contains("id: \(hub.boot)-2\ndata: {\"seq\":2,\"topic\":\"gatt2mqtt/bridge/state\",\"retain\":true,\"payload\":{\"state\":\"online\"}}\n\n"))
            #expect(text.contains("event: ready\ndata: {}\n\n"))
            #expect(text.contains("\"topic\":\"gatt2mqtt/camera\",\"retain\":true,\"payload\":{\"encoding\":true}}\n\n"))

            // A malformed request and an unknown path, over the wire.
            let bad = await offThePool { Self.exchange(port: port, "NOT HTTP\r\n\r\n") }
            #expect(bad.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
            let missing = await offThePool { Self.exchange(port: port, "GET /missing HTTP/1.1\r\n\r\n") }
            #expect(missing.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
            #expect(missing.hasSuffix(#"{"error":"not found: /missing"}"#))
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(await eventually { hub.subscriberCount == 0 })
    }

    // MARK: Limits, over sockets

    /// A TCP connection from `source` (a loopback address) to 127.0.0.1:`port`; -1 when it failed.
    /// `receiveBuffer`: a small SO_RCVBUF, for a client that stops reading.
    static func connect(port: Int, from source: String, receiveBuffer: Int32? = nil) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var local = loopbackAddress(port: 0)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, connectLoopback(fd, port: port) else {
            close(fd)
            return -1
        }
        return fd
    }

    /// Reads `fd` until the peer closes it (or 10 s pass); what was read, and whether it closed.
    static func readToEnd(_ fd: Int32) -> (text: String, closed: Bool) {
        var out = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { return (String(decoding: out, as: UTF8.self), true) }
            if n < 0 { return (String(decoding: out, as: UTF8.self), errno == ECONNRESET) }
            out += buffer[..<n]
        }
    }

    static func sendText(_ fd: Int32, _ text: String) { _ = text.withCString { send(fd, $0, strlen($0), 0) } }

    /// Runs `server` while `body` runs, then stops it.
    static func serving(_ server: some Service, _ body: () async throws -> Void) async throws {
        let group = ServiceGroup(configuration: .init(services: [server], logger: Logger(label: "frontend-test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await body()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// The host of `frontend.url` is a name the frontend answers to (users reach it by that name;
    /// Home Assistant links to it), as if it were in `allowed_hosts`; others are still refused.
    @Test(.timeLimit(.minutes(1))) func theHostOfFrontendURLIsAllowed() async throws {
        let (hub, _) = Self.hub()
        let port = try freeLoopbackPort()
        var settings = FrontendSettings(host: "127.0.0.1", port: port)
        settings.url = "https://gw.example/gatt2mqtt"
        #expect(settings.hostNames == ["gw.example"])
        let server = try FrontendServer(settings: settings, hub: hub, metrics: false, logger: Logger(label: "frontend-test"))
        try await Self.serving(server) {
            let named = await offThePool { Self.exchange(port: port, "GET /api/state HTTP/1.1\r\nHost: gw.example\r\n\r\n") }
            #expect(named.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(named)")
            let evil = await offThePool { Self.exchange(port: port, "GET /api/state HTTP/1.1\r\nHost: evil.example\r\n\r\n") }
            #expect(evil.hasPrefix("HTTP/1.1 421 Misdirected Request\r\n"), "\(evil)")
        }
        settings.url = "http://[fd00::1]:8080/"
        settings.allowedHosts = ["bridge.example"]
        #expect(settings.hostNames == ["bridge.example", "[fd00::1]"])
    }

    /// A request for a name the frontend does not answer to is refused over the wire, the token
    /// notwithstanding (before, a token switched the check off, and without a token it was made
    /// on loopback addresses only).
    @Test(.timeLimit(.minutes(1))) func foreignHostRefusedOverASocket() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("frontend-token-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("token").path
        try Self.token.write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        let (hub, received) = Self.hub()
        let port = try freeLoopbackPort()
        let server = try FrontendServer(settings: FrontendSettings(host: "127.0.0.1", port: port, authTokenFile: file), hub: hub, metrics: false,
                                        logger: Logger(label: "frontend-test"))
        try await Self.serving(server) {
            let evil = await offThePool {
                Self.exchange(port: port, "POST /api/request/health_check HTTP/1.1\r\nHost: evil.example\r\nOrigin: http://evil.example\r\n"
                    + "Authorization: Bearer \(Self.token)\r\nContent-Length: 2\r\n\r\n{}")
            }
            #expect(evil.hasPrefix("HTTP/1.1 421 Misdirected Request\r\n"), "\(evil)")
            let good = await offThePool {
                Self.exchange(port: port, "GET /api/state HTTP/1.1\r\nHost: localhost:\(port)\r\nAuthorization: Bearer \(Self.token)\r\n\r\n")
            }
            #expect(good.hasPrefix("HTTP/1.1 200 OK\r\n"))
        }
        #expect(received.withLock { $0 }.isEmpty)
    }

    /// One address holding its share of connections does not lock another out; an idle
    /// connection is closed after the request timeout, and its slot freed.
    @Test(.timeLimit(.minutes(1))) func perClientConnectionLimit() async throws {
        let (hub, _) = Self.hub()
        let port = try freeLoopbackPort()
        let server = try FrontendServer(settings: FrontendSettings(host: "127.0.0.1", port: port), hub: hub, metrics: false,
                                        logger: Logger(label: "frontend-test"),
                                        limits: .init(maxConnections: 4, maxPerClient: 2, requestTimeout: .seconds(3)))
        try await Self.serving(server) {
            let idle = [Self.connect(port: port, from: "127.0.0.1"), Self.connect(port: port, from: "127.0.0.1")]
            defer { idle.forEach { close($0) } }
            #expect(idle.allSatisfy { $0 >= 0 })
            #expect(await eventually { server.listener.connections.count == 2 })
            // A third from the same address: 503 and closed at once.
            let third = Self.connect(port: port, from: "127.0.0.1")
            defer { close(third) }
            let refused = await offThePool { Self.readToEnd(third) }
            #expect(refused.closed && refused.text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"), "\(refused)")
            // Another address is served.
            let other = await offThePool { () -> String in
                let fd = Self.connect(port: port, from: "127.0.0.2")
                defer { close(fd) }
                Self.sendText(fd, "GET /api/state HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return Self.readToEnd(fd).text
            }
            #expect(other.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(other)")
            // The idle ones are closed after the request timeout.
            let ended = await offThePool { idle.map { Self.readToEnd($0).closed } }
            #expect(ended == [true, true])
            #expect(await eventually { server.listener.connections.count == 0 })
        }
    }

    /// An event stream whose page stopped reading is dropped within the write timeout, and its
    /// slot freed (before, it held the slot for as long as the bridge ran).
    @Test(.timeLimit(.minutes(1))) func eventStreamThatIsNotReadIsDropped() async throws {
        let (hub, _) = Self.hub()
        let port = try freeLoopbackPort()
        let server = try FrontendServer(settings: FrontendSettings(host: "127.0.0.1", port: port), hub: hub, metrics: false,
                                        logger: Logger(label: "frontend-test"),
                                        limits: .init(maxConnections: 4, maxPerClient: 2, writeTimeout: .milliseconds(500)))
        try await Self.serving(server) {
            let fd = Self.connect(port: port, from: "127.0.0.1", receiveBuffer: 4096)
            defer { close(fd) }
            Self.sendText(fd, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await eventually { hub.subscriberCount == 1 })
            // Never read: the socket buffers fill (a few MiB on loopback), then the writes block.
            let big = [UInt8](repeating: UInt8(ascii: "a"), count: 256 * 1024)
            var published = 0
            #expect(await eventually(timeout: .seconds(30)) {
                if published < 64 {
                    hub.observe(OutboundMessage(topic: "gatt2mqtt/camera/big", payload: big, qos: 0, retain: true))
                    published += 1
                }
                return server.listener.connections.count == 0
            })
            #expect(await eventually { hub.subscriberCount == 0 })
        }
    }

    /// The metrics endpoint's own server: the same Host check and per-address limit.
    @Test(.timeLimit(.minutes(1))) func metricsServerHostCheckAndLimits() async throws {
        let port = try freeLoopbackPort()
        let server = try MetricsServer(settings: MetricsSettings(host: "127.0.0.1", port: port, allowedHosts: ["prometheus.example"]),
                                       logger: Logger(label: "metrics-test"),
                                       limits: .init(maxConnections: 4, maxPerClient: 1, requestTimeout: .seconds(30)))
        try await Self.serving(server) {
            let evil = await offThePool { Self.exchange(port: port, "GET /metrics HTTP/1.1\r\nHost: evil.example:\(port)\r\n\r\n") }
            #expect(evil.hasPrefix("HTTP/1.1 421 Misdirected Request\r\n"), "\(evil)")
            #expect(evil.contains("metrics.allowed_hosts"))
            for host in ["127.0.0.1:\(port)", "prometheus.example:\(port)"] {
                let ok = await offThePool { Self.exchange(port: port, "GET /metrics HTTP/1.1\r\nHost: \(host)\r\n\r\n") }
                #expect(ok.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(host)")
            }
            let idle = Self.connect(port: port, from: "127.0.0.1")
            defer { close(idle) }
            #expect(await eventually { server.listener.connections.count == 1 })
            let second = Self.connect(port: port, from: "127.0.0.1")
            defer { close(second) }
            let refused = await offThePool { Self.readToEnd(second) }
            #expect(refused.closed && refused.text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"), "\(refused)")
            let other = await offThePool { () -> String in
                let fd = Self.connect(port: port, from: "127.0.0.2")
                defer { close(fd) }
                Self.sendText(fd, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return Self.readToEnd(fd).text
            }
            #expect(other.hasPrefix("HTTP/1.1 200 OK\r\n"))
        }
    }
}
