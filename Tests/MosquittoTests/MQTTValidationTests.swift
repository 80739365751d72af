import CMosquitto
@testable import Mosquitto
import Reactor
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Checks that need no broker: topic rules (MQTT 5 §4.7), option validation, password
/// sources, backoff, error mapping.
@Suite struct MQTTValidationTests {
    /// The keep-alive check runs a quarter keep-alive apart (1 s to 15 s), not every second: an
    /// idle client at the default 60 s wakes its loop 4 times a minute, and its PINGREQ still
    /// goes out well inside the broker's 1.5 × keep-alive.
    @Test func keepAliveCheckInterval() {
        #expect(MQTTClientCore.miscInterval(keepAlive: 60) == .seconds(15))
        #expect(MQTTClientCore.miscInterval(keepAlive: 5) == .milliseconds(1250))
        #expect(MQTTClientCore.miscInterval(keepAlive: 3600) == .seconds(15))
        #expect(MQTTClientCore.miscInterval(keepAlive: 0) == .seconds(60))
        for k in [5, 10, 30, 60, 120, 65535] {
            #expect(.seconds(k) + MQTTClientCore.miscInterval(keepAlive: k) < .seconds(k) * 3 / 2, "keep-alive \(k)")
        }
    }

    @Test(arguments: ["a/b", "/", "a//b", "$SYS/x", "dev/ünïcode"])
    func validTopics(_ topic: String) throws {
        try MQTTTopic.validateTopic(topic)
    }

    @Test func topicLengthLimit() throws {
        try MQTTTopic.validateTopic(String(repeating: "x", count: 65535))
        #expect(throws: MQTTError.self) { try MQTTTopic.validateTopic(String(repeating: "x", count: 65536)) }
        #expect(throws: MQTTError.self) { try MQTTTopic.validateFilter(String(repeating: "x", count: 65536)) }
    }

    @Test(arguments: ["", "a/+/b", "a/#", "#", "+", "a\u{0}b"])
    func invalidTopics(_ topic: String) {
        #expect(throws: MQTTError.self) { try MQTTTopic.validateTopic(topic) }
        do {
            try MQTTTopic.validateTopic(topic)
        } catch {
            guard case .invalidTopic = error else {
                Issue.record("expected invalidTopic, got \(error)")
                return
            }
        }
    }

    @Test(arguments: ["a/b", "a/+/b", "a/#", "#", "+", "+/+", "$share/group/a/#"])
    func validFilters(_ filter: String) throws {
        try MQTTTopic.validateFilter(filter)
    }

    @Test(arguments: ["", "a/#/b", "a/b#", "a+/b", "#/", "a\u{0}"])
    func invalidFilters(_ filter: String) {
        do {
            try MQTTTopic.validateFilter(filter)
            Issue.record("\(filter) accepted")
        } catch {
            guard case .invalidTopicFilter = error else {
                Issue.record("expected invalidTopicFilter, got \(error)")
                return
            }
        }
    }

    @Test func matching() {
        #expect(MQTTTopic.matches(filter: "a/+/c", topic: "a/b/c"))
        #expect(MQTTTopic.matches(filter: "a/#", topic: "a"))
        #expect(MQTTTopic.matches(filter: "$share/g/a/#", topic: "a/b"))
        #expect(!MQTTTopic.matches(filter: "a/+", topic: "a/b/c"))
        #expect(!MQTTTopic.matches(filter: "#", topic: "$SYS/x"))
        #expect(!MQTTTopic.matches(filter: "a/b", topic: "a/bc"))
        #expect(!MQTTTopic.matches(filter: "$share/g", topic: "g"))
    }

    @Test("matching agrees with libmosquitto's mosquitto_topic_matches_sub on every valid filter and topic of up to four levels")
    func matchingAgreesWithLibmosquitto() {
        // Every filter of 1–3 levels of these words and wildcards that the broker would accept,
        // every topic of 1–4 levels of these words: `$` topics, empty levels, near misses.
        let filterLevels = ["a", "b", "ab", "", "+", "#", "$SYS"], topicLevels = ["a", "ab", "", "$SYS"]
        func combinations(_ words: [String], upTo n: Int) -> [String] {
            var all: [[String]] = words.map { [$0] }, last = all
            for _ in 1..<n {
                last = last.flatMap { p in words.map { p + [$0] } }
                all += last
            }
            return all.map { $0.joined(separator: "/") }
        }
        let filters = combinations(filterLevels, upTo: 3).filter { (try? MQTTTopic.validateFilter($0)) != nil }
        let topics = combinations(topicLevels, upTo: 4).filter { (try? MQTTTopic.validateTopic($0)) != nil }
        #expect(filters.count > 200 && topics.count > 300, "\(filters.count) filters, \(topics.count) topics")
        var compared = 0, matched = 0
        for filter in filters {
            for topic in topics {
                var reference = false
                guard mosquitto_topic_matches_sub(filter, topic, &reference) == 0 else { continue }
                compared += 1
                if reference { matched += 1 }
                #expect(MQTTTopic.matches(filter: filter, topic: topic) == reference, "filter \(filter), topic \(topic): libmosquitto \(reference)")
                #expect(MQTTTopic.matches(filter: "$share/g/" + filter, topic: topic) == reference, "$share/g/\(filter), topic \(topic)")
            }
        }
        #expect(compared == filters.count * topics.count && matched > 100 && matched < compared, "\(compared) compared, \(matched) matches")
    }

    @Test func unusableOptionsAreTypedErrors() {
        let loop = EventLoop(name: "t-mqtt")
        defer { loop.shutdown() }
        func rejects(_ what: Comment, _ change: (inout MQTTConnectOptions) -> Void) {
            var options = MQTTConnectOptions()
            change(&options)
            do {
                _ = try MQTTClient(options: options, loop: loop)
                Issue.record("accepted: \(what)")
            } catch {
                switch error {
                case .invalidOptions, .invalidTopic, .propertiesRequireMQTT5, .payloadTooLarge, .credentials: break
                default: Issue.record("\(what): unexpected \(error)")
                }
            }
        }
        rejects("port 0") { $0.port = 0 }
        rejects("port 70000") { $0.port = 70000 }
        rejects("empty host") { $0.host = "" }
        rejects("keepalive 3") { $0.keepAlive = 3 }
        rejects("persistent session without id") { $0.cleanSession = false }
        rejects("session expiry on 3.1.1") {
            $0.protocolVersion = .v311
            $0.sessionExpiryInterval = 60
        }
        rejects("will with wildcard") { $0.will = MQTTWill(topic: "a/#", payload: []) }
        rejects("will properties on 3.1.1") {
            $0.protocolVersion = .v311
            $0.will = MQTTWill(topic: "a", payload: [], properties: MQTTPublishProperties(contentType: "x"))
        }
        rejects("TLS without CA") { $0.tls = MQTTTLSOptions() }
        rejects("TLS missing CA file") { $0.tls = MQTTTLSOptions(caFile: "/nonexistent/ca.crt") }
        rejects("TLS cert without key") { $0.tls = MQTTTLSOptions(caFile: "/etc/hostname", certificateFile: "/etc/hostname") }
        rejects("TLS version") { $0.tls = MQTTTLSOptions(caFile: "/etc/hostname", version: "sslv3") }
        rejects("buffer 0") { $0.inboundBufferLimit = 0 }
        rejects("maximum packet size on 3.1.1") {
            $0.protocolVersion = .v311
            $0.maximumPacketSize = 4096
        }
        rejects("maximum packet size 0") { $0.maximumPacketSize = 0 }
        rejects("payload limit") { $0.maximumPayloadSize = 268_435_456 }
        rejects("reconnect min > max") {
            $0.reconnect.minimumDelay = .seconds(5)
            $0.reconnect.maximumDelay = .seconds(1)
        }
        rejects("offline queue 0") { $0.offlinePolicy = .queue(limit: 0) }
        rejects("password file missing") {
            $0.credentials = MQTTCredentials(username: "u", password: .file("/nonexistent/pw"))
        }
        rejects("password variable missing") {
            $0.credentials = MQTTCredentials(username: "u", password: .environment("GATT2MQTT_TEST_NO_SUCH_VARIABLE"))
        }
    }

    @Test func passwordNeverInDescriptions() throws {
        let credentials = MQTTCredentials(username: "bridge", password: .literal("s3cret-value"))
        #expect(!credentials.description.contains("s3cret-value"))
        let options = MQTTConnectOptions(credentials: credentials)
        #expect(!"\(options)".contains("s3cret-value"))
        #expect(!String(reflecting: options).contains("s3cret-value"))
        #expect("\(options)".contains("bridge"))
    }

    @Test func backoffIsJitteredExponentialAndBounded() {
        let policy = MQTTReconnectPolicy(minimumDelay: .milliseconds(100), maximumDelay: .seconds(2))
        #expect(policy.delay(forAttempt: 1, random: 0) == .milliseconds(50))
        #expect(policy.delay(forAttempt: 1, random: 1) == .milliseconds(100))
        #expect(policy.delay(forAttempt: 3, random: 1) == .milliseconds(400))
        #expect(policy.delay(forAttempt: 3, random: 0.5) == .milliseconds(300))
        #expect(policy.delay(forAttempt: 10, random: 1) == .seconds(2))
        #expect(policy.delay(forAttempt: 1000, random: 0) == .seconds(1))
        let samples = Set((0..<50).map { _ in policy.delay(forAttempt: 4) })
        #expect(samples.count > 1, "delays are jittered")
        #expect(samples.allSatisfy { $0 >= .milliseconds(400) && $0 <= .milliseconds(800) })
    }

    @Test func mosquittoCodesMapFromReturnValues() {
        #expect(MosquittoCode(code: 4) == .noConnection)
        #expect(MosquittoCode(code: 8) == .tls)
        #expect(MosquittoCode(code: 25) == .oversizePacket)
        #expect(MosquittoCode(code: 999) == .other(999))
        for code in Int32(1)...31 where code != 14 {
            #expect(MosquittoCode(code: code).code == code)
        }
        #expect(MosquittoCode(code: 4).description.contains("connect"))
        #expect(MQTTReasonCode.notAuthorized.isFailure)
        #expect(!MQTTReasonCode.noMatchingSubscribers.isFailure)
        #expect(MQTTReasonCode(mqtt311Connack: 5).isFailure)
    }

    /// SUBACK codes (mosquitto 2.0 grants ACL-denied subscriptions, so refusals are checked here).
    @Test func subackCodes() throws {
        #expect(try MQTTClient.grantedQoS([1], filter: "a") == .atLeastOnce)
        #expect(try MQTTClient.grantedQoS([0], filter: "a") == .atMostOnce)
        #expect(throws: MQTTError.subscribeRejected(filter: "a", .notAuthorized)) { try MQTTClient.grantedQoS([0x87], filter: "a") }
        #expect(throws: MQTTError.subscribeRejected(filter: "a", .unspecifiedError)) { try MQTTClient.grantedQoS([0x80], filter: "a") }
        #expect(throws: MQTTError.self) { try MQTTClient.grantedQoS([], filter: "a") }
    }

    @Test func operationsBeforeConnectFailCleanly() async throws {
        let loop = EventLoop(name: "t-mqtt")
        defer { loop.shutdown() }
        let client = try MQTTClient(options: MQTTConnectOptions(port: 1), loop: loop)
        await #expect(throws: MQTTError.notConnected) { try await client.publish(topic: "a", payload: [1]) }
        // A subscription made before connect() is registered locally and sent on CONNACK.
        let early = try await client.subscribe("a", qos: .exactlyOnce)
        #expect(early.grantedQoS == .exactlyOnce)
        try await early.unsubscribe()
        var iterator = early.makeAsyncIterator()
        #expect(await iterator.next() == nil)
        await #expect(throws: MQTTError.invalidTopic("a/#", reason: "contains a wildcard (+ or #)")) {
            try await client.publish(topic: "a/#", payload: [])
        }
        await client.disconnect()
        await #expect(throws: MQTTError.closed) { try await client.connect() }
    }

    @Test func connectionRefusedByClosedPortIsTypedError() async throws {
        let loop = EventLoop(name: "t-mqtt")
        defer { loop.shutdown() }
        let client = try MQTTClient(options: MQTTConnectOptions(port: try freeLoopbackPort()), loop: loop)
        do {
            try await client.connect()
            Issue.record("connected to a closed port")
        } catch {
            #expect(error == .library(.system(errno: ECONNREFUSED), operation: "connect"))
        }
        await #expect(throws: MQTTError.closed) { try await client.publish(topic: "a", payload: [1]) }
    }
}
