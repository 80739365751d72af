import Foundation
import Mosquitto
import Reactor
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Integration tests against a real mosquitto started per test from `Fixtures/*.conf`.
/// Serialized so that the thread and RSS measurements of the leak test see only their own
/// clients; the whole suite stays well under two minutes.
@Suite(.serialized) struct MQTTBrokerTests {
    // MARK: Publish / subscribe

    @Test(arguments: ClientMode.allCases, [MQTTProtocolVersion.v5, .v311])
    func publishSubscribeAtEveryQoS(mode: ClientMode, version: MQTTProtocolVersion) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let subscriber = try await clients.client(broker) { $0.protocolVersion = version }
        let publisher = try await clients.client(broker) { $0.protocolVersion = version }
        for qos in MQTTQoS.allCases {
            let subscription = try await subscriber.subscribe("qos/\(qos.rawValue)/#", qos: qos)
            #expect(subscription.grantedQoS == qos)
            try await publisher.publish(topic: "qos/\(qos.rawValue)/x", payload: Array("hello \(qos)".utf8), qos: qos)
            let received = await collect(subscription, count: 1)
            #expect(received.count == 1)
            #expect(received.first?.topic == "qos/\(qos.rawValue)/x")
            #expect(received.first?.payloadString == "hello \(qos)")
            #expect(received.first?.qos == qos)
            #expect(received.first?.retain == false)
        }
        #expect(publisher.statistics.unacknowledgedPublishes == 0)
        await subscriber.disconnect()
        await publisher.disconnect()
    }

    @Test func retainedMessageReachesLateSubscriberAndCanBeCleared() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let publisher = try await broker.client()
        try await publisher.publish(topic: "bridge/state", payload: Array(#"{"state":"online"}"#.utf8), qos: .atLeastOnce, retain: true)

        let late = try await broker.client()
        let subscription = try await late.subscribe("bridge/state")
        let received = await collect(subscription, count: 1)
        #expect(received.first?.payloadString == #"{"state":"online"}"#)
        #expect(received.first?.retain == true)

        try await publisher.publish(topic: "bridge/state", payload: [], qos: .atLeastOnce, retain: true)
        let cleared = try await broker.client()
        let none = await collect(try await cleared.subscribe("bridge/state"), count: 1, timeout: .milliseconds(500))
        #expect(none.isEmpty)
        for client in [publisher, late, cleared] { await client.disconnect() }
    }

    @Test func unsubscribeStopsDelivery() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let client = try await broker.client()
        let gone = try await client.subscribe("u/gone")
        let kept = try await client.subscribe("u/kept")
        try await gone.unsubscribe()
        // The stream of the removed subscription has ended.
        var iterator = gone.makeAsyncIterator()
        #expect(await iterator.next() == nil)

        try await client.publish(topic: "u/gone", payload: [1], qos: .atLeastOnce)
        try await client.publish(topic: "u/kept", payload: [2], qos: .atLeastOnce)
        let received = await collect(kept, count: 1)
        #expect(received.map(\.payload) == [[2]])
        try await Task.sleep(for: .milliseconds(200))
        // The broker no longer sends u/gone: nothing arrived unrouted.
        #expect(client.statistics.unroutedMessages == 0)
        #expect(client.statistics.deliveredMessages == 1)

        try await client.unsubscribe("u/kept")
        var keptIterator = kept.makeAsyncIterator()
        #expect(await keptIterator.next() == nil)
        await client.disconnect()
    }

    @Test func scopedSubscriptionUnsubscribesWhenTheClosureEnds() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let client = try await broker.client()
        let transport: any MQTTTransport = client  // the bridge sees only the protocol
        let first = try await transport.withSubscription("scoped/#") { subscription in
            try await transport.publish(topic: "scoped/a", payload: [7], qos: .atLeastOnce)
            return await collect(subscription, count: 1).first?.payload
        }
        #expect(first == [7])
        try await client.publish(topic: "scoped/a", payload: [8], qos: .atLeastOnce)
        try await Task.sleep(for: .milliseconds(200))
        #expect(client.statistics.unroutedMessages == 0, "the broker no longer sends scoped/#")
        await client.disconnect()
    }

    // MARK: Will

    @Test func willOfKilledProcessIsDelivered() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let watcher = try await broker.client()
        let wills = try await watcher.subscribe("will/#")
        let child = try ChildProcess(
            "/usr/bin/mosquitto_sub",
            ["-h", "127.0.0.1", "-p", String(broker.port), "-i", "doomed", "-t", "nothing", "-q", "1",
             "--will-topic", "will/doomed", "--will-payload", "offline", "--will-qos", "1"],
            log: broker.directory.path + "/child.log")
        defer { child.kill() }
        #expect(await eventually { broker.log.contains("as doomed") })
        child.kill(SIGKILL)
        let received = await collect(wills, count: 1)
        #expect(received.first?.topic == "will/doomed")
        #expect(received.first?.payloadString == "offline")
        await watcher.disconnect()
    }

    @Test(arguments: ClientMode.allCases)
    func ourWillIsSentOnAbruptCloseButNotOnDisconnect(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let watcher = try await clients.client(broker)
        let wills = try await watcher.subscribe("gatt2mqtt/bridge/state")
        let proxy = try TCPProxy(targetPort: broker.port)
        defer { proxy.close() }
        let will = MQTTWill(
            topic: "gatt2mqtt/bridge/state", payload: Array(#"{"state":"offline"}"#.utf8), qos: .atLeastOnce,
            retain: false, properties: MQTTPublishProperties(contentType: "application/json"))
        var options = broker.options(clientID: "bridge-with-will")
        options.port = proxy.port
        options.will = will
        options.reconnect.enabled = false
        let bridge = try clients.make(options)
        try await bridge.connect()

        // A graceful disconnect of another client with the same Will publishes nothing.
        let polite = try await clients.client(broker) {
            $0.clientID = "polite"
            $0.will = will
        }
        await polite.disconnect()

        proxy.close()  // the broker sees the TCP connection drop without DISCONNECT
        let received = await collect(wills, count: 2, timeout: .milliseconds(1500))
        #expect(received.count == 1)
        #expect(received.first?.payloadString == #"{"state":"offline"}"#)
        #expect(received.first?.properties.contentType == "application/json")
        await bridge.disconnect()
        await watcher.disconnect()
    }

    // MARK: MQTT 5 properties

    @Test(arguments: ClientMode.allCases)
    func mqtt5PropertiesRoundTrip(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let client = try await clients.client(broker)
        let subscription = try await client.subscribe("req/+", qos: .exactlyOnce)
        let properties = MQTTPublishProperties(
            payloadIsUTF8: true, messageExpiryInterval: 120, contentType: "application/json",
            responseTopic: "gatt2mqtt/cam/response", correlationData: [0, 1, 2, 0xFF],
            userProperties: [MQTTUserProperty("transaction", "42"), MQTTUserProperty("a", "1"), MQTTUserProperty("a", "2")])
        try await client.publish(topic: "req/1", payload: Array("{}".utf8), qos: .exactlyOnce, properties: properties)
        let received = try #require(await collect(subscription, count: 1).first)
        #expect(received.properties.payloadIsUTF8 == true)
        #expect(received.properties.contentType == "application/json")
        #expect(received.properties.responseTopic == "gatt2mqtt/cam/response")
        #expect(received.properties.correlationData == [0, 1, 2, 0xFF])
        #expect(received.properties.userProperties == properties.userProperties)
        let expiry = try #require(received.properties.messageExpiryInterval)
        #expect(expiry <= 120 && expiry >= 118)
        await client.disconnect()
    }

    @Test func propertiesOnMQTT311AreRejected() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let client = try await broker.client { $0.protocolVersion = .v311 }
        await #expect(throws: MQTTError.propertiesRequireMQTT5) {
            try await client.publish(topic: "a", payload: [], properties: MQTTPublishProperties(contentType: "x"))
        }
        // The client is still usable.
        try await client.publish(topic: "a", payload: [1], qos: .atLeastOnce)
        await client.disconnect()
    }

    @Test func badInputGetsTypedErrorsAndTheClientKeepsWorking() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let client = try await broker.client { $0.maximumPayloadSize = 1024 }
        await #expect(throws: MQTTError.payloadTooLarge(size: 1025, limit: 1024)) {
            try await client.publish(topic: "a", payload: [UInt8](repeating: 0, count: 1025))
        }
        await #expect(throws: MQTTError.self) { try await client.publish(topic: "a/+", payload: []) }
        await #expect(throws: MQTTError.self) { _ = try await client.subscribe("a/#/b") }
        await #expect(throws: MQTTError.self) {
            try await client.publish(topic: "a", payload: [], properties: MQTTPublishProperties(responseTopic: "r/#"))
        }
        let subscription = try await client.subscribe("a")
        try await client.publish(topic: "a", payload: [UInt8](repeating: 7, count: 1024), qos: .atLeastOnce)
        #expect(await collect(subscription, count: 1).first?.payload.count == 1024)
        await client.disconnect()
    }

    @Test(arguments: [MQTTProtocolVersion.v5, .v311])
    func brokerRefusalsAreTypedReasonCodes(version: MQTTProtocolVersion) async throws {
        let broker = try MosquittoBroker(fixture: "acl.conf") { dir in
            try "topic readwrite public/#\n".write(toFile: dir + "/acl", atomically: true, encoding: .utf8)
        }
        defer { broker.stop() }
        let client = try await broker.client { $0.protocolVersion = version }
        if version == .v5 {
            // MQTT 5 PUBACK carries the refusal (MQTT 5 §3.4.2.1).
            do {
                try await client.publish(topic: "secret/x", payload: [1], qos: .atLeastOnce)
                Issue.record("denied publish acknowledged as success")
            } catch {
                #expect(error == .publishRejected(topic: "secret/x", .notAuthorized))
            }
        } else {
            // MQTT 3.1.1 has no way to refuse a publish: PUBACK, and the message is dropped.
            try await client.publish(topic: "secret/x", payload: [1], qos: .atLeastOnce)
        }
        // Still connected and working.
        let allowed = try await client.subscribe("public/#")
        try await client.publish(topic: "public/x", payload: [2], qos: .atLeastOnce)
        #expect(await collect(allowed, count: 1).first?.payload == [2])
        await client.disconnect()
    }

    // MARK: Credentials and TLS

    @Test(arguments: ClientMode.allCases)
    func usernameAndPasswordFromFileAndEnvironment(mode: ClientMode) async throws {
        let broker = try MosquittoBroker(fixture: "auth.conf") { dir in
            try runTool("/usr/bin/mosquitto_passwd", ["-b", "-c", dir + "/passwd", "bridge", "pa55 word"], in: dir)
            try "pa55 word\n".write(toFile: dir + "/password.txt", atomically: true, encoding: .utf8)
        }
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let fromFile = try await clients.client(broker) {
            $0.credentials = MQTTCredentials(username: "bridge", password: .file(broker.directory.path + "/password.txt"))
        }
        try await fromFile.publish(topic: "a", payload: [1], qos: .atLeastOnce)
        await fromFile.disconnect()

        setenv("GATT2MQTT_TEST_MQTT_PASSWORD", "pa55 word", 1)
        let fromEnvironment = try await clients.client(broker) {
            $0.credentials = MQTTCredentials(username: "bridge", password: .environment("GATT2MQTT_TEST_MQTT_PASSWORD"))
        }
        await fromEnvironment.disconnect()

        for version in [MQTTProtocolVersion.v5, .v311] {
            var options = broker.options(protocolVersion: version)
            options.credentials = MQTTCredentials(username: "bridge", password: .literal("wrong"))
            let refused = try clients.make(options)
            do {
                try await refused.connect()
                Issue.record("wrong password accepted")
            } catch {
                guard case .connectionRefused(let code) = error else {
                    Issue.record("expected connectionRefused, got \(error)")
                    continue
                }
                #expect(code.isFailure)
                if version == .v5 { #expect([0x86, 0x87].contains(code.rawValue)) } else { #expect([4, 5].contains(code.rawValue)) }
            }
        }
        #expect(!broker.log.contains("pa55"))
    }

    @Test(arguments: ClientMode.allCases)
    func tlsWithClientCertificatesAndHostnameVerification(mode: ClientMode) async throws {
        let broker = try MosquittoBroker(fixture: "tls.conf") { dir in try makeCertificates(in: dir) }
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let dir = broker.directory.path
        let tls = MQTTTLSOptions(
            caFile: dir + "/ca.crt", certificateFile: dir + "/client.crt", keyFile: dir + "/client.key", version: "tlsv1.2")

        // The server certificate names "localhost" only.
        let good = try await clients.client(broker) {
            $0.host = "localhost"
            $0.tls = tls
        }
        let subscription = try await good.subscribe("secure")
        try await good.publish(topic: "secure", payload: [42], qos: .atLeastOnce)
        #expect(await collect(subscription, count: 1).first?.payload == [42])
        await good.disconnect()

        // Same broker by IP: the name does not match, so verification fails by default …
        let mismatch = try clients.make({ var o = broker.options(); o.tls = tls; return o }())
        await #expect(throws: MQTTError.library(.tls, operation: "connect")) { try await mismatch.connect() }
        // … and succeeds only when hostname verification is explicitly off.
        var insecure = tls
        insecure.verifyHostname = false
        let unchecked = try await clients.client(broker) { $0.tls = insecure }
        await unchecked.disconnect()

        // No client certificate: the broker refuses the handshake.
        let anonymous = try clients.make({
            var o = broker.options()
            o.host = "localhost"
            o.tls = MQTTTLSOptions(caFile: dir + "/ca.crt")
            return o
        }())
        do {
            try await anonymous.connect()
            Issue.record("connected without a client certificate")
        } catch {
            guard case .library = error else {
                Issue.record("expected a library (TLS/connection) error, got \(error)")
                return
            }
        }

        // An encrypted client key with its passphrase from a file; a wrong one is refused locally.
        try "k3y phrase\n".write(toFile: dir + "/key-pass.txt", atomically: true, encoding: .utf8)
        var encrypted = tls
        encrypted.keyFile = dir + "/client-enc.key"
        encrypted.keyPassword = .file(dir + "/key-pass.txt")
        let withKeyPassword = try await clients.client(broker) {
            $0.host = "localhost"
            $0.tls = encrypted
        }
        await withKeyPassword.disconnect()
        encrypted.keyPassword = .literal("wrong")
        do {
            _ = try await clients.client(broker) {
                $0.host = "localhost"
                $0.tls = encrypted
            }
            Issue.record("wrong key passphrase accepted")
        } catch let error as MQTTError {
            guard case .library = error else {
                Issue.record("expected a library (TLS) error, got \(error)")
                return
            }
        }

        // A CA that did not sign the server certificate.
        let stranger = try clients.make({
            var o = broker.options()
            o.host = "localhost"
            o.tls = MQTTTLSOptions(caFile: dir + "/other-ca.crt", certificateFile: dir + "/client.crt", keyFile: dir + "/client.key")
            return o
        }())
        await #expect(throws: MQTTError.library(.tls, operation: "connect")) { try await stranger.connect() }
    }

    // MARK: Load

    @Test(arguments: ClientMode.allCases)
    func burstOf10000QoS1MessagesArrivesOnceEach(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let subscriber = try await clients.client(broker) { $0.inboundBufferLimit = 10_000 }
        let publisher = try await clients.client(broker) { $0.maxInflightMessages = 100 }
        let subscription = try await subscriber.subscribe("burst/#", qos: .atLeastOnce)
        let total = 10_000
        async let received = collect(subscription, count: total, timeout: .seconds(30))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<50 {
                group.addTask {
                    for id in stride(from: worker, to: total, by: 50) {
                        try await publisher.publish(topic: "burst/\(worker)", payload: Array(String(id).utf8), qos: .atLeastOnce)
                    }
                }
            }
            try await group.waitForAll()
        }
        var messages = await received
        // Anything after the 10 000th would be a duplicate.
        messages += await collect(subscription, count: 1, timeout: .milliseconds(500))
        let ids = messages.compactMap { Int($0.payloadString) }
        #expect(messages.count == total)
        #expect(Set(ids).count == total)
        #expect(Set(ids) == Set(0..<total))
        #expect(subscriber.statistics.droppedMessages == 0)
        await subscriber.disconnect()
        await publisher.disconnect()
    }

    /// `publishDetached` hands each message over before it returns: 2 000 QoS 1 messages from
    /// one caller arrive in call order, each completion runs once with success, and bad input
    /// is reported through the completion without stopping the client.
    @Test(arguments: ClientMode.allCases)
    func detachedPublishesKeepCallOrderAndComplete(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let subscriber = try await clients.client(broker) { $0.inboundBufferLimit = 10_000 }
        let publisher = try await clients.client(broker) { $0.maxInflightMessages = 100 }
        let subscription = try await subscriber.subscribe("ordered/#", qos: .atLeastOnce)
        let total = 2_000
        let outcomes = Mutex<[Int: Bool]>([:])
        for id in 0..<total {
            publisher.publishDetached(topic: "ordered/\(id % 3)", payload: Array(String(id).utf8), qos: .atLeastOnce) { result in
                outcomes.withLock { o in
                    o[id] = o[id] == nil && (try? result.get()) != nil
                }
            }
        }
        let messages = await collect(subscription, count: total, timeout: .seconds(20))
        #expect(messages.compactMap { Int($0.payloadString) } == Array(0..<total))
        #expect(await eventually { outcomes.withLock { $0.count } == total })
        #expect(outcomes.withLock { $0.values.allSatisfy { $0 } })
        let bad = Mutex<MQTTError?>(nil)
        publisher.publishDetached(topic: "bad/#", payload: [1]) { result in
            if case let .failure(e) = result { bad.withLock { $0 = e } }
        }
        #expect(bad.withLock { $0 } != nil, "a wildcard topic is refused through the completion")
        try await publisher.publish(topic: "ordered/after", payload: Array("after".utf8), qos: .atLeastOnce)
        #expect(await collect(subscription, count: 1).first?.payloadString == "after")
        await subscriber.disconnect()
        await publisher.disconnect()
    }

    /// A subscription with a handler gets every message on the network thread, in order; its
    /// stream carries none and ends when the subscription does.
    @Test(arguments: ClientMode.allCases)
    func handlerSubscriptionDeliversInOrder(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let client = try await clients.client(broker)
        let got = Mutex<[String]>([])
        let onLoop = Mutex<[Bool]>([])
        let loop = clients.loop
        let subscription = try await client.subscribe("handled/#", qos: .atLeastOnce) { m in
            got.withLock { $0.append(m.payloadString) }
            if let loop { onLoop.withLock { $0.append(loop.inLoop) } }
        }
        for i in 0..<200 { try await client.publish(topic: "handled/\(i % 4)", payload: Array(String(i).utf8), qos: .atLeastOnce) }
        #expect(await eventually { got.withLock { $0.count } == 200 })
        #expect(got.withLock { $0 } == (0..<200).map(String.init))
        if mode == .loop {
            #expect(onLoop.withLock { $0.count == 200 && $0.allSatisfy { $0 } }, "the handler runs on the loop thread")
        }
        #expect(client.statistics.deliveredMessages >= 200)
        let ended = Task { var n = 0; for await _ in subscription { n += 1 }; return n }
        try await subscription.unsubscribe()
        #expect(await ended.value == 0)
        await client.disconnect()
    }

    /// While the broker is away, detached QoS 1 publishes wait in the offline queue (QoS 0 ones
    /// fail at once) and go out in order after the reconnect, ahead of newer ones.
    @Test(arguments: ClientMode.allCases)
    func detachedPublishesQueueWhileTheBrokerIsAway(mode: ClientMode) async throws {
        let broker = try MosquittoBroker(fixture: "persistent.conf")
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let publisher = try await clients.client(broker) {
            $0.clientID = "detached-publisher"
            $0.offlinePolicy = .queue(limit: 100)
            $0.reconnect.minimumDelay = .milliseconds(100)
            $0.reconnect.maximumDelay = .milliseconds(200)
        }
        broker.kill(SIGKILL)
        #expect(await eventually { !publisher.statistics.isConnected })
        let completed = Mutex<[Int]>([])
        let qos0 = Mutex<MQTTError?>(nil)
        publisher.publishDetached(topic: "queued/x", payload: [0], qos: .atMostOnce) { result in
            if case let .failure(e) = result { qos0.withLock { $0 = e } }
        }
        #expect(qos0.withLock { $0 } == .notConnected)
        for id in 0..<20 {
            publisher.publishDetached(topic: "queued/x", payload: Array(String(id).utf8), qos: .atLeastOnce, retain: true) { result in
                if (try? result.get()) != nil { completed.withLock { $0.append(id) } }
            }
        }
        #expect(publisher.statistics.unacknowledgedPublishes == 20)
        try broker.start()
        // Sent while the client may still be reconnecting or flushing: it must not overtake.
        publisher.publishDetached(topic: "queued/x", payload: Array("newest".utf8), qos: .atLeastOnce, retain: true) { _ in }
        #expect(await eventually(timeout: .seconds(10)) { completed.withLock { $0.count } == 20 })
        #expect(completed.withLock { $0 } == Array(0..<20))
        #expect(await eventually { publisher.statistics.unacknowledgedPublishes == 0 })
        // The retained value is the last one sent: the queue went out in order, the newest last.
        let reader = try await clients.client(broker)
        let retained = try await reader.subscribe("queued/x", qos: .atLeastOnce)
        let first = await collect(retained, count: 1).first?.payloadString
        #expect(first == "newest", "retained \(first ?? "nothing")")
        await reader.disconnect()
        await publisher.disconnect()
    }

    // MARK: Reconnect and persistence

    @Test(arguments: ClientMode.allCases)
    func brokerKilledAndRestartedWhileMessagesFlow(mode: ClientMode) async throws {
        let broker = try MosquittoBroker(fixture: "persistent.conf")
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        // The subscriber comes back over a second after the publisher, so the messages
        // published during the outage reach the broker while the subscriber is still away:
        // only the persistent session (restored from the broker's database) can deliver them.
        let subscriber = try await clients.client(broker) {
            $0.clientID = "persistent-subscriber"
            $0.cleanSession = false
            $0.sessionExpiryInterval = 3600
            $0.reconnect.minimumDelay = .seconds(3)  // first retry 1.5…3 s after the kill
            $0.reconnect.maximumDelay = .seconds(3)
        }
        let events = subscriber.connectionEvents()
        let publisher = try await clients.client(broker) {
            $0.clientID = "offline-publisher"
            $0.offlinePolicy = .queue(limit: 100)
        }
        let subscription = try await subscriber.subscribe("flow/#", qos: .atLeastOnce)
        for id in 0..<10 {
            try await publisher.publish(topic: "flow/a", payload: Array(String(id).utf8), qos: .atLeastOnce)
        }
        try await Task.sleep(for: .milliseconds(500))  // the broker saves its database on each change

        broker.kill(SIGKILL)
        #expect(await eventually { !subscriber.statistics.isConnected && !publisher.statistics.isConnected })
        // Offline: QoS 0 fails fast, QoS 1 is queued (the calls return once acknowledged later).
        await #expect(throws: MQTTError.notConnected) { try await publisher.publish(topic: "flow/a", payload: [0]) }
        let queued = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for id in 10..<40 {
                    group.addTask {
                        try await publisher.publish(topic: "flow/a", payload: Array(String(id).utf8), qos: .atLeastOnce)
                    }
                }
                try await group.waitForAll()
            }
        }
        #expect(await eventually { publisher.statistics.unacknowledgedPublishes == 30 })
        try await Task.sleep(for: .milliseconds(300))
        try broker.start()  // same port, same persistence directory
        try await queued.value  // acknowledged by the broker …
        #expect(!subscriber.statistics.isConnected)  // … while the subscriber is still away

        let messages = await collect(subscription, count: 40, timeout: .seconds(15))
        let ids = messages.compactMap { Int($0.payloadString) }
        #expect(Set(ids) == Set(0..<40))
        var seen: [MQTTConnectionEvent] = []
        for await event in events {
            seen.append(event)
            if case .connected = event, seen.count > 1 { break }
        }
        #expect(seen.contains { if case .disconnected(let reason) = $0 { reason != nil } else { false } })
        #expect(seen.contains { if case .reconnecting = $0 { true } else { false } })
        #expect(seen.last == .connected(sessionPresent: true))
        await subscriber.disconnect()
        await publisher.disconnect()
    }

    @Test(arguments: ClientMode.allCases)
    func persistentSessionReceivesWhatWasPublishedWhileAway(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        for version in [MQTTProtocolVersion.v5, .v311] {
            let id = "away-\(version)"
            let first = try await clients.client(broker) {
                $0.clientID = id
                $0.protocolVersion = version
                $0.cleanSession = false
                if version == .v5 { $0.sessionExpiryInterval = 600 }
            }
            // Kept alive: dropping a subscription unsubscribes, which would end the session's interest.
            let firstSubscription = try await first.subscribe("away/\(version)", qos: .atLeastOnce)
            await first.disconnect()
            #expect(firstSubscription.filter == "away/\(version)")

            let publisher = try await clients.client(broker)
            for n in 0..<5 {
                try await publisher.publish(topic: "away/\(version)", payload: [UInt8(n)], qos: .atLeastOnce)
            }
            await publisher.disconnect()

            // Back again: the broker kept the session and sends the queued messages right after
            // CONNACK, so the local subscription is made before connect().
            var options = broker.options(clientID: id, protocolVersion: version)
            options.cleanSession = false
            if version == .v5 { options.sessionExpiryInterval = 600 }
            let again = try clients.make(options)
            let subscription = try await again.subscribe("away/\(version)", qos: .atLeastOnce)
            let events = again.connectionEvents()
            try await again.connect()
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == .connected(sessionPresent: true))
            let received = await collect(subscription, count: 5)
            #expect(received.map(\.payload) == (0..<5).map { [UInt8($0)] })
            await again.disconnect()
        }
    }

    @Test(arguments: ClientMode.allCases)
    func subscriptionsAreRenewedAndMadeDuringAnOutage(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let client = try await clients.client(broker)  // clean session: the broker forgets everything
        let before = try await client.subscribe("renewed")
        broker.kill(SIGKILL)
        #expect(await eventually { !client.statistics.isConnected })
        let during = try await client.subscribe("made/offline", qos: .exactlyOnce)  // returns at once
        #expect(during.grantedQoS == .exactlyOnce)
        try broker.start()
        #expect(await eventually { client.statistics.isConnected })
        let other = try await clients.client(broker)
        try await Task.sleep(for: .milliseconds(100))  // the SUBSCRIBEs follow CONNACK
        try await other.publish(topic: "renewed", payload: [1], qos: .atLeastOnce)
        try await other.publish(topic: "made/offline", payload: [2], qos: .atLeastOnce)
        #expect(await collect(before, count: 1).map(\.payload) == [[1]])
        #expect(await collect(during, count: 1).map(\.payload) == [[2]])
        await other.disconnect()
        await client.disconnect()
    }

    @Test(arguments: ClientMode.allCases)
    func retryInitialConnectWaitsForTheBroker(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        broker.kill(SIGKILL)  // the port is known, nothing listens yet
        var options = broker.options()
        options.reconnect.retryInitialConnect = true
        let client = try clients.make(options)
        let events = client.connectionEvents()
        let connecting = Task { try await client.connect() }
        var iterator = events.makeAsyncIterator()
        guard case .reconnecting(attempt: 1, _)? = await iterator.next() else {
            Issue.record("expected a scheduled retry")
            return
        }
        try broker.start()
        try await connecting.value
        #expect(client.statistics.isConnected)
        await client.disconnect()

        // Without the option the first failure is thrown.
        broker.kill(SIGKILL)
        let impatient = try clients.make(broker.options())
        await #expect(throws: MQTTError.library(.system(errno: ECONNREFUSED), operation: "connect")) {
            try await impatient.connect()
        }
    }

    @Test func failFastPolicyRejectsPublishesWhileDisconnected() async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let client = try await broker.client {
            $0.offlinePolicy = .failFast
            $0.reconnect.minimumDelay = .seconds(5)
            $0.reconnect.maximumDelay = .seconds(5)
        }
        broker.kill(SIGKILL)
        #expect(await eventually { !client.statistics.isConnected })
        await #expect(throws: MQTTError.notConnected) {
            try await client.publish(topic: "a", payload: [1], qos: .atLeastOnce)
        }
        await client.disconnect()
    }

    @Test(arguments: ClientMode.allCases)
    func boundedOfflineQueueOverflows(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let client = try await clients.client(broker) {
            $0.offlinePolicy = .queue(limit: 3)
            $0.reconnect.minimumDelay = .seconds(5)
            $0.reconnect.maximumDelay = .seconds(5)
        }
        broker.kill(SIGKILL)
        #expect(await eventually { !client.statistics.isConnected })
        let pending = (0..<3).map { n in
            Task { try await client.publish(topic: "q", payload: [UInt8(n)], qos: .atLeastOnce) }
        }
        #expect(await eventually { client.statistics.unacknowledgedPublishes == 3 })
        await #expect(throws: MQTTError.offlineQueueFull(limit: 3)) {
            try await client.publish(topic: "q", payload: [9], qos: .atLeastOnce)
        }
        await client.disconnect()
        for task in pending {
            await #expect(throws: MQTTError.closed) { try await task.value }
        }
    }

    // MARK: Lifecycle

    @Test(arguments: ClientMode.allCases)
    func hundredConnectDisconnectCyclesLeakNoThreadsOrMemory(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        func cycle() async throws {
            let client = try await clients.client(broker)
            let subscription = try await client.subscribe("cycle")
            try await client.publish(topic: "cycle", payload: [1], qos: .atLeastOnce)
            _ = await collect(subscription, count: 1)
            await client.disconnect()
        }
        for _ in 0..<10 { try await cycle() }  // warm up allocator and the concurrency pool
        let threadsBefore = threadCounts()
        let rssBefore = residentBytes()
        for _ in 0..<100 { try await cycle() }
        let threadsAfter = threadCounts()
        let rssAfter = residentBytes()
        #expect(threadsAfter.mqtt == 0)
        #expect(threadsAfter.all <= threadsBefore.all + 1, "threads \(threadsBefore.all) → \(threadsAfter.all)")
        #expect(rssAfter - rssBefore < 4 << 20, "RSS grew \((rssAfter - rssBefore) >> 10) KiB")
        #expect(await clients.loopIsEmpty())

        // A client dropped without disconnect() stops its thread (loop mode: leaves the loop) too.
        do {
            _ = try await clients.client(broker)
        }
        #expect(await eventually { threadCounts().mqtt == 0 })
        var empty = false
        for _ in 0..<100 where !empty {
            empty = await clients.loopIsEmpty()
            if !empty { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(empty, "a dropped loop-mode client removes its watch, timers and hook")
    }

    @Test(arguments: ClientMode.allCases)
    func disconnectEndsStreamsAndEvents(mode: ClientMode) async throws {
        let broker = try MosquittoBroker()
        defer { broker.stop() }
        let clients = ClientFactory(mode)
        defer { clients.shutdown() }
        let client = try await clients.client(broker)
        let events = client.connectionEvents()
        let subscription = try await client.subscribe("x")
        if let loop = clients.loop {
            // Connected: the socket's watch, the keep-alive timer, the flush hook.
            #expect(await loop.registrations() == EventLoop.Registrations(watches: 1, timers: 1, hooks: 1))
        }
        await client.disconnect()
        #expect(await clients.loopIsEmpty(), "disconnect() leaves no watch, timer or hook on the loop")
        var iterator = subscription.makeAsyncIterator()
        #expect(await iterator.next() == nil)
        var seen: [MQTTConnectionEvent] = []
        for await event in events { seen.append(event) }
        #expect(seen == [.disconnected(reason: nil)])
        await #expect(throws: MQTTError.closed) { try await client.publish(topic: "x", payload: []) }
    }
}

/// CA, server certificate for DNS:localhost, client certificate, and an unrelated CA.
func makeCertificates(in dir: String) throws {
    let openssl = "/usr/bin/openssl"
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    try runTool(openssl, ["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=gatt2mqtt test CA"], in: dir)
    try runTool(openssl, ["req", "-x509"] + ec + ["-keyout", "other-ca.key", "-out", "other-ca.crt", "-days", "2", "-subj", "/CN=other CA"], in: dir)
    try "subjectAltName=DNS:localhost\n".write(toFile: dir + "/server.ext", atomically: true, encoding: .utf8)
    try "extendedKeyUsage=clientAuth\n".write(toFile: dir + "/client.ext", atomically: true, encoding: .utf8)
    for (name, cn) in [("server", "localhost"), ("client", "gatt2mqtt-client")] {
        try runTool(openssl, ["req"] + ec + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(cn)"], in: dir)
        try runTool(
            openssl,
            ["x509", "-req", "-in", "\(name).csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "\(name).crt",
             "-days", "2", "-extfile", "\(name).ext"], in: dir)
    }
    try runTool(openssl, ["pkey", "-in", "client.key", "-aes256", "-passout", "pass:k3y phrase", "-out", "client-enc.key"], in: dir)
}
