import Foundation
import Logging
@testable import Mosquitto
import Reactor
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Integration tests against a real mosquitto started per test from `Fixtures/*.conf`, each
/// test with its own broker and its own event loop for its clients.
@Suite struct MQTTBrokerTests {
    // MARK: Publish / subscribe

    @Test(arguments: [MQTTProtocolVersion.v5, .v311])
    func publishSubscribeAtEveryQoS(version: MQTTProtocolVersion) async throws {
        try await withBroker { broker, loop in
            let subscriber = try await broker.client(loop: loop) { $0.protocolVersion = version }
            let publisher = try await broker.client(loop: loop) { $0.protocolVersion = version }
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
    }

    /// MQTT 5 Maximum Packet Size in CONNECT: the broker drops a message too large for the
    /// client instead of sending it; the next one that fits arrives.
    @Test func theBrokerSendsNothingAboveTheMaximumPacketSize() async throws {
        try await withBroker { broker, loop in
            let limited = try await broker.client(loop: loop) { $0.maximumPacketSize = 2048 }
            let unlimited = try await broker.client(loop: loop)
            let publisher = try await broker.client(loop: loop)
            let small = try await limited.subscribe("big/#", qos: .atLeastOnce)
            let large = try await unlimited.subscribe("big/#", qos: .atLeastOnce)
            try await publisher.publish(topic: "big/1", payload: Array(repeating: 0x61, count: 10_000), qos: .atLeastOnce)
            try await publisher.publish(topic: "big/2", payload: Array("fits".utf8), qos: .atLeastOnce)
            let got = await collect(small, count: 1)
            #expect(got.map(\.topic) == ["big/2"], "the 10 000-byte message was not delivered")
            let both = await collect(large, count: 2)
            #expect(both.map(\.payload.count) == [10_000, 4], "without the limit both arrive")
            await limited.disconnect()
            await unlimited.disconnect()
            await publisher.disconnect()
        }
    }

    @Test func retainedMessageReachesLateSubscriberAndCanBeCleared() async throws {
        try await withBroker { broker, loop in
            let publisher = try await broker.client(loop: loop)
            try await publisher.publish(topic: "bridge/state", payload: Array(#"{"state":"online"}"#.utf8), qos: .atLeastOnce, retain: true)

            let late = try await broker.client(loop: loop)
            let subscription = try await late.subscribe("bridge/state")
            let received = await collect(subscription, count: 1)
            #expect(received.first?.payloadString == #"{"state":"online"}"#)
            #expect(received.first?.retain == true)

            try await publisher.publish(topic: "bridge/state", payload: [], qos: .atLeastOnce, retain: true)
            let cleared = try await broker.client(loop: loop)
            let subscription2 = try await cleared.subscribe("bridge/state")
            // A retained message is sent on subscribing, so it would come before this live one.
            try await publisher.publish(topic: "bridge/state", payload: Array("marker".utf8), qos: .atLeastOnce)
            let first = await collect(subscription2, count: 1)
            #expect(first.first?.payloadString == "marker")
            #expect(first.first?.retain == false, "no retained message left")
            for client in [publisher, late, cleared] { await client.disconnect() }
        }
    }

    @Test func unsubscribeStopsDelivery() async throws {
        try await withBroker { broker, loop, client in
            let gone = try await client.subscribe("u/gone")
            let kept = try await client.subscribe("u/kept")
            try await gone.unsubscribe()
            // The stream of the removed subscription has ended.
            var iterator = gone.makeAsyncIterator()
            #expect(await iterator.next() == nil)

            try await client.publish(topic: "u/gone", payload: [1], qos: .atLeastOnce)
            try await client.publish(topic: "u/kept", payload: [2], qos: .atLeastOnce)
            // u/gone was published first: had the broker still sent it, it would have arrived
            // (and been counted) before u/kept.
            let received = await collect(kept, count: 1)
            #expect(received.map(\.payload) == [[2]])
            // The broker no longer sends u/gone: nothing arrived unrouted.
            #expect(client.statistics.unroutedMessages == 0)
            #expect(client.statistics.deliveredMessages == 1)

            try await client.unsubscribe("u/kept")
            var keptIterator = kept.makeAsyncIterator()
            #expect(await keptIterator.next() == nil)
        }
    }

    @Test func scopedSubscriptionUnsubscribesWhenTheClosureEnds() async throws {
        try await withBroker { broker, loop, client in
            let transport: any MQTTTransport = client  // the bridge sees only the protocol
            let first = try await transport.withSubscription("scoped/#") { subscription in
                try await transport.publish(topic: "scoped/a", payload: [7], qos: .atLeastOnce)
                return await collect(subscription, count: 1).first?.payload
            }
            #expect(first == [7])
            let marker = try await client.subscribe("marker")
            try await client.publish(topic: "scoped/a", payload: [8], qos: .atLeastOnce)
            try await client.publish(topic: "marker", payload: [9], qos: .atLeastOnce)
            // Had the broker still sent scoped/a, it would have arrived before the marker.
            #expect(await collect(marker, count: 1).first?.payload == [9])
            #expect(client.statistics.unroutedMessages == 0, "the broker no longer sends scoped/#")
        }
    }

    // MARK: Will

    @Test func willOfKilledProcessIsDelivered() async throws {
        try await withBroker { broker, loop, watcher in
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
        }
    }

    @Test func ourWillIsSentOnAbruptCloseButNotOnDisconnect() async throws {
        try await withBroker { broker, loop, watcher in
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
            let bridge = try MQTTClient(options: options, loop: loop)
            try await bridge.connect()

            // A graceful disconnect of another client with the same Will (but for its payload, to
            // tell them apart) publishes nothing.
            var politeWill = will
            politeWill.payload = Array(#"{"state":"offline","client":"polite"}"#.utf8)
            let polite = try await broker.client(loop: loop) {
                $0.clientID = "polite"
                $0.will = politeWill
            }
            await polite.disconnect()

            proxy.close()  // the broker sees the TCP connection drop without DISCONNECT
            var received = await collectUntil(wills) { $0.payloadString == #"{"state":"offline"}"# }
            // A marker published after the Will arrived comes after anything published before it.
            try await watcher.publish(topic: "gatt2mqtt/bridge/state", payload: Array("marker".utf8), qos: .atLeastOnce)
            received += await collectUntil(wills) { $0.payloadString == "marker" }
            #expect(received.last?.payloadString == "marker")
            received.removeAll { $0.payloadString == "marker" }
            #expect(received.count == 1, "\(received.map(\.payloadString))")
            #expect(received.first?.payloadString == #"{"state":"offline"}"#)
            #expect(received.first?.properties.contentType == "application/json")
            await bridge.disconnect()
        }
    }

    // MARK: MQTT 5 properties

    @Test func mqtt5PropertiesRoundTrip() async throws {
        try await withBroker { broker, loop, client in
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
        }
    }

    @Test func propertiesOnMQTT311AreRejected() async throws {
        try await withBroker(client: { $0.protocolVersion = .v311 }) { broker, loop, client in
            await #expect(throws: MQTTError.propertiesRequireMQTT5) {
                try await client.publish(topic: "a", payload: [], properties: MQTTPublishProperties(contentType: "x"))
            }
            // The client is still usable.
            try await client.publish(topic: "a", payload: [1], qos: .atLeastOnce)
        }
    }

    @Test func badInputGetsTypedErrorsAndTheClientKeepsWorking() async throws {
        try await withBroker(client: { $0.maximumPayloadSize = 1024 }) { broker, loop, client in
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
        }
    }

    @Test(arguments: [MQTTProtocolVersion.v5, .v311])
    func brokerRefusalsAreTypedReasonCodes(version: MQTTProtocolVersion) async throws {
        let acl: @Sendable (String) throws -> Void = { dir in
            try "topic readwrite public/#\n".write(toFile: dir + "/acl", atomically: true, encoding: .utf8)
        }
        try await withBroker(fixture: "acl.conf", prepare: acl, client: { $0.protocolVersion = version }) { broker, loop, client in
            if version == .v5 {
                // MQTT 5 PUBACK carries the refusal (MQTT 5 §3.4.2.1).
                do throws(MQTTError) {
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
        }
    }

    // MARK: Credentials and TLS

    @Test func usernameAndPasswordFromFileAndEnvironment() async throws {
        let passwords: @Sendable (String) throws -> Void = { dir in
            try runTool("/usr/bin/mosquitto_passwd", ["-b", "-c", dir + "/passwd", "bridge", "pa55 word"], in: dir)
            try "pa55 word\n".write(toFile: dir + "/password.txt", atomically: true, encoding: .utf8)
        }
        try await withBroker(fixture: "auth.conf", prepare: passwords) { broker, loop in
            let fromFile = try await broker.client(loop: loop) {
                $0.credentials = MQTTCredentials(username: "bridge", password: .file(broker.directory.path + "/password.txt"))
            }
            try await fromFile.publish(topic: "a", payload: [1], qos: .atLeastOnce)
            await fromFile.disconnect()

            // The process' environment is shared with every test running beside this one and every
            // child they start: a name of this test's own, not `GATT2MQTT_…` (which a bridge child
            // would refuse as an unknown override), removed again at once.
            let variable = "MQTT_TEST_PASSWORD_\(getpid())_\(broker.port)"
            setEnvironmentVariable(variable, "pa55 word")
            defer { setEnvironmentVariable(variable, nil) }
            let fromEnvironment = try await broker.client(loop: loop) {
                $0.credentials = MQTTCredentials(username: "bridge", password: .environment(variable))
            }
            await fromEnvironment.disconnect()

            for version in [MQTTProtocolVersion.v5, .v311] {
                var options = broker.options(protocolVersion: version)
                options.credentials = MQTTCredentials(username: "bridge", password: .literal("wrong"))
                let refused = try MQTTClient(options: options, loop: loop)
                do throws(MQTTError) {
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
    }

    @Test func tlsWithClientCertificatesAndHostnameVerification() async throws {
        try await withBroker(fixture: "tls.conf", prepare: { dir in try makeCertificates(in: dir) }) { broker, loop in
            let dir = broker.directory.path
            let tls = MQTTTLSOptions(
                caFile: dir + "/ca.crt", certificateFile: dir + "/client.crt", keyFile: dir + "/client.key", version: "tlsv1.2")

            // The server certificate names "localhost" only.
            let good = try await broker.client(loop: loop) {
                $0.host = "localhost"
                $0.tls = tls
            }
            let subscription = try await good.subscribe("secure")
            try await good.publish(topic: "secure", payload: [42], qos: .atLeastOnce)
            #expect(await collect(subscription, count: 1).first?.payload == [42])
            await good.disconnect()

            // Same broker by IP: the name does not match, so verification fails by default …
            let mismatch = try MQTTClient(options: { var o = broker.options(); o.tls = tls; return o }(), loop: loop)
            await #expect(throws: MQTTError.library(.tls, operation: "connect")) { try await mismatch.connect() }
            // … and succeeds only when hostname verification is explicitly off.
            var insecure = tls
            insecure.verifyHostname = false
            let unchecked = try await broker.client(loop: loop) { $0.tls = insecure }
            await unchecked.disconnect()

            // No client certificate: the broker refuses the handshake.
            let anonymous = try MQTTClient(options: {
                var o = broker.options()
                o.host = "localhost"
                o.tls = MQTTTLSOptions(caFile: dir + "/ca.crt")
                return o
            }(), loop: loop)
            do throws(MQTTError) {
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
            let withKeyPassword = try await broker.client(loop: loop) {
                $0.host = "localhost"
                $0.tls = encrypted
            }
            await withKeyPassword.disconnect()
            encrypted.keyPassword = .literal("wrong")
            do {
                _ = try await broker.client(loop: loop) {
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
            let stranger = try MQTTClient(options: {
                var o = broker.options()
                o.host = "localhost"
                o.tls = MQTTTLSOptions(caFile: dir + "/other-ca.crt", certificateFile: dir + "/client.crt", keyFile: dir + "/client.key")
                return o
            }(), loop: loop)
            await #expect(throws: MQTTError.library(.tls, operation: "connect")) { try await stranger.connect() }
        }
    }

    // MARK: Load

    @Test func burstOf10000QoS1MessagesArrivesOnceEach() async throws {
        try await withBroker { broker, loop in
            let subscriber = try await broker.client(loop: loop) { $0.inboundBufferLimit = 10_000 }
            let publisher = try await broker.client(loop: loop) { $0.maxInflightMessages = 100 }
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
            // Anything after the 10 000th would be a duplicate: a marker published after all of
            // them were acknowledged comes after any (one subscription keeps the broker's order).
            try await publisher.publish(topic: "burst/marker", payload: Array("marker".utf8), qos: .atLeastOnce)
            messages += await collectUntil(subscription) { $0.topic == "burst/marker" }.filter { $0.topic != "burst/marker" }
            let ids = messages.compactMap { Int($0.payloadString) }
            #expect(messages.count == total)
            #expect(Set(ids).count == total)
            #expect(Set(ids) == Set(0..<total))
            #expect(subscriber.statistics.droppedMessages == 0)
            await subscriber.disconnect()
            await publisher.disconnect()
        }
    }

    /// `publishDetached` hands each message over before it returns: 2 000 QoS 1 messages from
    /// one caller arrive in call order, each completion runs once with success, and bad input
    /// is reported through the completion without stopping the client.
    @Test func detachedPublishesKeepCallOrderAndComplete() async throws {
        try await withBroker { broker, loop in
            let subscriber = try await broker.client(loop: loop) { $0.inboundBufferLimit = 10_000 }
            let publisher = try await broker.client(loop: loop) { $0.maxInflightMessages = 100 }
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
    }

    /// A subscription with a handler gets every message on the loop thread, in order; its
    /// stream carries none and ends when the subscription does.
    @Test func handlerSubscriptionDeliversInOrder() async throws {
        try await withBroker { broker, loop, client in
            let got = Mutex<[String]>([])
            let onLoop = Mutex<[Bool]>([])
            let subscription = try await client.subscribe("handled/#", qos: .atLeastOnce) { m in
                got.withLock { $0.append(m.payloadString) }
                onLoop.withLock { $0.append(loop.inLoop) }
            }
            for i in 0..<200 { try await client.publish(topic: "handled/\(i % 4)", payload: Array(String(i).utf8), qos: .atLeastOnce) }
            #expect(await eventually { got.withLock { $0.count } == 200 })
            #expect(got.withLock { $0 } == (0..<200).map(String.init))
            #expect(onLoop.withLock { $0.count == 200 && $0.allSatisfy { $0 } }, "the handler runs on the loop thread")
            #expect(client.statistics.deliveredMessages >= 200)
            let ended = Task { var n = 0; for await _ in subscription { n += 1 }; return n }
            try await subscription.unsubscribe()
            #expect(await ended.value == 0)
        }
    }

    /// While the broker is away, detached QoS 1 publishes wait in the offline queue (QoS 0 ones
    /// fail at once) and go out in order after the reconnect, ahead of newer ones.
    @Test func detachedPublishesQueueWhileTheBrokerIsAway() async throws {
        try await withBroker(fixture: "persistent.conf") { broker, loop in
            let publisher = try await broker.client(loop: loop) {
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
            try await broker.restart()
            // Sent while the client may still be reconnecting or flushing: it must not overtake.
            publisher.publishDetached(topic: "queued/x", payload: Array("newest".utf8), qos: .atLeastOnce, retain: true) { _ in }
            #expect(await eventually(timeout: .seconds(10)) { completed.withLock { $0.count } == 20 })
            #expect(completed.withLock { $0 } == Array(0..<20))
            #expect(await eventually { publisher.statistics.unacknowledgedPublishes == 0 })
            // The retained value is the last one sent: the queue went out in order, the newest last.
            let reader = try await broker.client(loop: loop)
            let retained = try await reader.subscribe("queued/x", qos: .atLeastOnce)
            let first = await collect(retained, count: 1).first?.payloadString
            #expect(first == "newest", "retained \(first ?? "nothing")")
            await reader.disconnect()
            await publisher.disconnect()
        }
    }

    // MARK: Reconnect and persistence

    @Test func brokerKilledAndRestartedWhileMessagesFlow() async throws {
        try await withBroker(fixture: "persistent.conf") { broker, loop in
            // The subscriber comes back over a second after the publisher, so the messages
            // published during the outage reach the broker while the subscriber is still away:
            // only the persistent session (restored from the broker's database) can deliver them.
            let subscriber = try await broker.client(loop: loop) {
                $0.clientID = "persistent-subscriber"
                $0.cleanSession = false
                $0.sessionExpiryInterval = 3600
                $0.reconnect.minimumDelay = .seconds(3)  // first retry 1.5…3 s after the kill
                $0.reconnect.maximumDelay = .seconds(3)
            }
            let events = subscriber.connectionEvents()
            let publisher = try await broker.client(loop: loop) {
                $0.clientID = "offline-publisher"
                $0.offlinePolicy = .queue(limit: 100)
            }
            let subscription = try await subscriber.subscribe("flow/#", qos: .atLeastOnce)
            // The broker saves its database after changes (it logs each save as it begins): one begun
            // after the SUBACK holds the session with its subscription.
            let saves = { broker.log.components(separatedBy: "Saving in-memory database").count - 1 }
            let savedBefore = saves()
            for id in 0..<10 {
                try await publisher.publish(topic: "flow/a", payload: Array(String(id).utf8), qos: .atLeastOnce)
            }
            // Delivered before the kill: a message the broker took but neither delivered nor saved
            // when it is SIGKILLed is lost (mosquitto saves its database at intervals), and the
            // test is about the messages published during the outage.
            var seenIDs = Set<Int>()
            let early = await collectUntil(subscription, timeout: .seconds(30)) { m in
                if let id = Int(m.payloadString) { seenIDs.insert(id) }
                return seenIDs.isSuperset(of: 0..<10)
            }
            #expect(seenIDs == Set(0..<10), "\(early.map(\.payloadString))")
            #expect(await eventually { saves() > savedBefore })

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
            try await broker.restart()  // same port, same persistence directory
            try await queued.value  // acknowledged by the broker …
            #expect(!subscriber.statistics.isConnected)  // … while the subscriber is still away

            // At least once: a message not yet acknowledged when the broker died comes again.
            let messages = await collectUntil(subscription, timeout: .seconds(30)) { m in
                if let id = Int(m.payloadString) { seenIDs.insert(id) }
                return seenIDs.isSuperset(of: 0..<40)
            }
            #expect(seenIDs == Set(0..<40), "\(messages.map(\.payloadString))")
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
    }

    @Test func persistentSessionReceivesWhatWasPublishedWhileAway() async throws {
        try await withBroker { broker, loop in
            for version in [MQTTProtocolVersion.v5, .v311] {
                let id = "away-\(version)"
                let first = try await broker.client(loop: loop) {
                    $0.clientID = id
                    $0.protocolVersion = version
                    $0.cleanSession = false
                    if version == .v5 { $0.sessionExpiryInterval = 600 }
                }
                // Kept alive: dropping a subscription unsubscribes, which would end the session's interest.
                let firstSubscription = try await first.subscribe("away/\(version)", qos: .atLeastOnce)
                await first.disconnect()
                #expect(firstSubscription.filter == "away/\(version)")

                let publisher = try await broker.client(loop: loop)
                for n in 0..<5 {
                    try await publisher.publish(topic: "away/\(version)", payload: [UInt8(n)], qos: .atLeastOnce)
                }
                await publisher.disconnect()

                // Back again: the broker kept the session and sends the queued messages right after
                // CONNACK, so the local subscription is made before connect().
                var options = broker.options(clientID: id, protocolVersion: version)
                options.cleanSession = false
                if version == .v5 { options.sessionExpiryInterval = 600 }
                let again = try MQTTClient(options: options, loop: loop)
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
    }

    @Test func subscriptionsAreRenewedAndMadeDuringAnOutage() async throws {
        try await withBroker { broker, loop, client in  // clean session: the broker forgets everything
            let before = try await client.subscribe("renewed")
            broker.kill(SIGKILL)
            #expect(await eventually { !client.statistics.isConnected })
            let during = try await client.subscribe("made/offline", qos: .exactlyOnce)  // returns at once
            #expect(during.grantedQoS == .exactlyOnce)
            try await broker.restart()
            #expect(await eventually { client.statistics.isConnected })
            let other = try await broker.client(loop: loop)
            // The renewing SUBSCRIBEs follow CONNACK: once a later one is acknowledged, the broker
            // has handled them (it handles one client's packets in order).
            _ = try await client.subscribe("renewal/marker")
            try await other.publish(topic: "renewed", payload: [1], qos: .atLeastOnce)
            try await other.publish(topic: "made/offline", payload: [2], qos: .atLeastOnce)
            #expect(await collect(before, count: 1).map(\.payload) == [[1]])
            #expect(await collect(during, count: 1).map(\.payload) == [[2]])
            await other.disconnect()
        }
    }

    @Test func retryInitialConnectWaitsForTheBroker() async throws {
        try await withBroker { broker, loop in
            broker.kill(SIGKILL)  // the port is known, nothing listens yet
            var options = broker.options()
            options.reconnect.retryInitialConnect = true
            let client = try MQTTClient(options: options, loop: loop)
            let events = client.connectionEvents()
            let connecting = Task { try await client.connect() }
            var iterator = events.makeAsyncIterator()
            guard case .reconnecting(attempt: 1, _)? = await iterator.next() else {
                Issue.record("expected a scheduled retry")
                return
            }
            try await broker.restart()
            try await connecting.value
            #expect(client.statistics.isConnected)
            await client.disconnect()

            // Without the option the first failure is thrown.
            broker.kill(SIGKILL)
            let impatient = try MQTTClient(options: broker.options(), loop: loop)
            await #expect(throws: MQTTError.library(.system(errno: ECONNREFUSED), operation: "connect")) {
                try await impatient.connect()
            }
        }
    }

    @Test func failFastPolicyRejectsPublishesWhileDisconnected() async throws {
        try await withBroker { broker, loop in
            let client = try await broker.client(loop: loop) {
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
    }

    @Test func boundedOfflineQueueOverflows() async throws {
        try await withBroker { broker, loop in
            let client = try await broker.client(loop: loop) {
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
    }

    // MARK: Lifecycle

    /// Every client of 100 connect/disconnect cycles is freed (its libmosquitto instance
    /// destroyed, its connect helper thread gone: it held the client until it ended) and leaves
    /// nothing on the loop; so is a client dropped without `disconnect()`.
    @Test func hundredConnectDisconnectCyclesLeakNothing() async throws {
        try await withBroker { broker, loop in
            let cores = Mutex<[WeakCore]>([])
            func cycle() async throws {
                let client = try await broker.client(loop: loop)
                cores.withLock { $0.append(WeakCore(client.core)) }
                let subscription = try await client.subscribe("cycle")
                try await client.publish(topic: "cycle", payload: [1], qos: .atLeastOnce)
                _ = await collect(subscription, count: 1)
                await client.disconnect()
            }
            for _ in 0..<100 { try await cycle() }
            #expect(await eventually { cores.withLock { $0.allSatisfy { $0.core == nil } } },
                    "\(cores.withLock { $0.filter { $0.core != nil }.count }) of 100 clients still alive")
            #expect(await loop.registrations() == EventLoop.nothingRegistered)

            // A client dropped without disconnect() leaves the loop and is freed too.
            do {
                let dropped = try await broker.client(loop: loop)
                cores.withLock { $0 = [WeakCore(dropped.core)] }
            }
            #expect(await eventually { cores.withLock { $0[0].core == nil } })
            #expect(await loop.settled() == EventLoop.nothingRegistered, "a dropped client removes its watch, timers and hook")
        }
    }

    @Test func disconnectEndsStreamsAndEvents() async throws {
        try await withBroker { broker, loop in
            let client = try await broker.client(loop: loop)
            let events = client.connectionEvents()
            let subscription = try await client.subscribe("x")
            // Connected: the socket's watch, the keep-alive timer, the flush hook.
            #expect(await loop.registrations() == EventLoop.Registrations(watches: 1, timers: 1, hooks: 1))
            await client.disconnect()
            #expect(await loop.registrations() == EventLoop.nothingRegistered, "disconnect() leaves no watch, timer or hook on the loop")
            var iterator = subscription.makeAsyncIterator()
            #expect(await iterator.next() == nil)
            var seen: [MQTTConnectionEvent] = []
            for await event in events { seen.append(event) }
            #expect(seen == [.disconnected(reason: nil)])
            await #expect(throws: MQTTError.closed) { try await client.publish(topic: "x", payload: []) }
        }
    }
}

/// What running on the event loop means (docs/mqtt.md "The event loop"), against a real mosquitto.
@Suite struct MQTTLoopTests {
    /// Tasks that prefer the loop connect, subscribe, publish and await acks without leaving it;
    /// once disconnected the client leaves nothing on the loop and is freed (its connect helper
    /// thread, which held it, has ended).
    @Test func everythingRunsOnTheLoopThread() async throws {
        try await withBroker(loopName: "mqtt-loop-only") { broker, loop in
            let result = try await withTaskExecutorPreference(loop) { () async throws -> ([Bool], WeakCore) in
                var onLoop: [Bool] = []
                let client = try MQTTClient(options: broker.options(), loop: loop)
                try await client.connect()
                onLoop.append(loop.inLoop)
                let subscription = try await client.subscribe("only/loop", qos: .atLeastOnce)
                onLoop.append(loop.inLoop)
                try await client.publish(topic: "only/loop", payload: [1, 2, 3], qos: .atLeastOnce)
                onLoop.append(loop.inLoop)
                var iterator = subscription.makeAsyncIterator()
                let message = await iterator.next()
                onLoop.append(loop.inLoop)
                #expect(message?.payload == [1, 2, 3])
                await client.disconnect()
                onLoop.append(loop.inLoop)
                return (onLoop, WeakCore(client.core))
            }
            #expect(result.0 == [true, true, true, true, true])
            #expect(await eventually { result.1.core == nil }, "the client is freed: the connect helper has ended")
            #expect(await loop.registrations() == EventLoop.nothingRegistered)
        }
    }

    /// `publishDetached` on the loop only queues: within the loop turn that made them, no
    /// message has been written (QoS 0 completions run on the write); the hook writes them all
    /// before the loop sleeps, and they arrive in order.
    @Test func publishesMadeInOneLoopTurnLeaveTogetherAfterIt() async throws {
        try await withBroker(loopName: "mqtt-burst") { broker, loop in
            let subscriber = try await broker.client(loop: loop)
            let subscription = try await subscriber.subscribe("burst/#", qos: .atMostOnce)
            let publisher = try MQTTClient(options: broker.options(), loop: loop)
            try await publisher.connect()

            let total = 100
            let written = Mutex<[Int]>([])
            let writtenOnLoop = Mutex<Bool>(true)
            let writtenDuringTheTurn = await withCheckedContinuation { (c: CheckedContinuation<Int, Never>) in
                loop.execute {
                    for id in 0..<total {
                        publisher.publishDetached(topic: "burst/\(id % 5)", payload: Array(String(id).utf8)) { result in
                            if (try? result.get()) != nil { written.withLock { $0.append(id) } }
                            if !loop.inLoop { writtenOnLoop.withLock { $0 = false } }
                        }
                    }
                    c.resume(returning: written.withLock { $0.count })
                }
            }
            #expect(writtenDuringTheTurn == 0, "nothing is written while the loop turn that published runs")
            #expect(await eventually { written.withLock { $0.count } == total })
            #expect(written.withLock { $0 } == Array(0..<total), "written in call order")
            #expect(writtenOnLoop.withLock { $0 }, "completions run on the loop thread")
            let received = await collect(subscription, count: total)
            #expect(received.compactMap { Int($0.payloadString) } == Array(0..<total))
            await publisher.disconnect()
            await subscriber.disconnect()
            #expect(await loop.registrations() == EventLoop.nothingRegistered)
        }
    }

    /// The keep-alive timer runs `mosquitto_loop_misc`: an idle client sends PINGREQ about one
    /// keep-alive interval (5 s) after its last packet, and the broker answers.
    @Test func keepAliveTimerSendsPings() async throws {
        try await withBroker(fixture: "debug.conf", loopName: "mqtt-keepalive") { broker, loop in
            var options = broker.options(clientID: "idle-loop")
            options.keepAlive = 5
            let client = try MQTTClient(options: options, loop: loop)
            let events = client.connectionEvents()
            try await client.connect()
            let subscription = try await client.subscribe("idle/echo", qos: .atLeastOnce)
            #expect(await eventually(timeout: .seconds(9)) { broker.log.contains("Received PINGREQ from idle-loop") })
            #expect(await eventually { broker.log.contains("Sending PINGRESP to idle-loop") })
            #expect(client.statistics.isConnected)
            try await client.publish(topic: "idle/echo", payload: [9], qos: .atLeastOnce)
            #expect(await collect(subscription, count: 1).first?.payload == [9])
            await client.disconnect()
            var seen: [MQTTConnectionEvent] = []
            for await event in events { seen.append(event) }
            #expect(seen == [.connected(sessionPresent: false), .disconnected(reason: nil)], "no reconnect happened")
        }
    }

    /// disconnect() during a reconnect backoff returns at once, fails the queued publish and
    /// cancels the retry timer.
    @Test func disconnectDuringBackoffCancelsTheRetry() async throws {
        try await withBroker(loopName: "mqtt-backoff") { broker, loop in
            var options = broker.options()
            options.reconnect.minimumDelay = .seconds(20)
            options.reconnect.maximumDelay = .seconds(20)
            let client = try MQTTClient(options: options, loop: loop)
            try await client.connect()
            broker.kill(SIGKILL)
            #expect(await eventually { !client.statistics.isConnected })
            let queued = Task { try await client.publish(topic: "q", payload: [1], qos: .atLeastOnce) }
            #expect(await eventually { client.statistics.unacknowledgedPublishes == 1 })
            #expect(await loop.registrations() == EventLoop.Registrations(watches: 0, timers: 1, hooks: 1), "waiting: the retry timer")
            let start = ContinuousClock.now
            await client.disconnect()
            #expect(ContinuousClock.now - start < .seconds(5))
            await #expect(throws: MQTTError.closed) { try await queued.value }
            #expect(await loop.registrations() == EventLoop.nothingRegistered)
        }
    }

    /// A connect that blocks (here: SYNs to a listener whose accept queue is full are dropped,
    /// so the kernel retransmits them for minutes — all on loopback) runs on the helper thread:
    /// meanwhile the loop keeps running jobs and timers, and `disconnect()` returns at once.
    @Test func aBlockedConnectDoesNotStallTheLoop() async throws {
        let loop = EventLoop(name: "mqtt-slow-connect")
        defer { loop.shutdown() }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let port = try #require(bindLoopback(listener))
        #expect(listen(listener, 0) == 0)
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)  // fills the accept queue
        #expect(connectLoopback(filler, port: port))

        let core: WeakCore
        do {
            let client = try MQTTClient(options: MQTTConnectOptions(host: "127.0.0.1", port: port), loop: loop)
            core = WeakCore(client.core)
            let connectEnded = Flag()
            let connecting = Task {
                defer { connectEnded.set() }
                try await client.connect()
            }
            // In the connect, waiting for a SYN-ACK.
            #expect(await eventually { connectPending(toPort: port) })
            let ranDuringTheConnect = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                loop.execute { c.resume(returning: !connectEnded.isSet) }
            }
            #expect(ranDuringTheConnect, "a loop job ran while the connect was blocked")
            // And a loop timer fires (its event waited for with a deadline: a stalled loop fails here).
            let timers = WaitableLog<Bool>()
            let timer = Task {
                try await loop.sleep(for: .milliseconds(20))
                timers.append(true)
            }
            #expect(await timers.wait(timeout: .seconds(10)) { !$0.isEmpty } != nil, "a loop timer fired during the connect")
            timer.cancel()
            #expect(!connectEnded.isSet)
            #expect(!client.statistics.isConnected)
            await client.disconnect()  // does not wait for the blocked attempt
            await #expect(throws: MQTTError.closed) { try await connecting.value }
            #expect(await loop.registrations() == EventLoop.nothingRegistered)
        }
        // Closing the listener refuses the next retransmitted SYN (the kernel resends it 1, 3, 7, 15, 31 s
        // after the first: up to ~30 s on a loaded machine): the helper's connect fails,
        // its result is dropped on the loop and the thread exits, releasing the client.
        close(filler)
        close(listener)
        #expect(await eventually(timeout: .seconds(40)) { core.core == nil })
        #expect(await loop.registrations() == EventLoop.nothingRegistered)
    }
}

/// A flag set once, read from any thread.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
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

/// libmosquitto's own log lines (one per packet, at its debug level) reach the client's logger
/// when it takes debug lines; otherwise the log callback is not installed at all, so the library
/// formats nothing (docs/benchmarks.md, "Against the floor").
@Suite struct MQTTLibraryLogTests {
    final class Lines: Sendable { let items = Mutex<[String]>([]) }
    struct Recorder: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            if event.metadata?["source"] == "libmosquitto" { lines.items.withLock { $0.append("\(event.message)") } }
        }
    }

    /// A handler whose level can change while the client runs (as `bridge/request/options` does).
    final class Level: Sendable { let value = Mutex(Logger.Level.info) }
    struct Shared: LogHandler {
        let lines: Lines
        let level: Level
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level {
            get { level.value.withLock { $0 } }
            set { level.value.withLock { $0 = newValue } }
        }
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            if event.metadata?["source"] == "libmosquitto" { lines.items.withLock { $0.append("\(event.message)") } }
        }
    }

    /// The level turned to debug while the client runs: libmosquitto's lines follow from the next
    /// packet on; turned back, they stop.
    @Test func libraryLinesFollowTheLevelAtRunTime() async throws {
        try await withBroker(loopName: "mqtt-liblog-rt") { broker, loop in
            let lines = Lines()
            let level = Level()
            let logger = Logger(label: "liblog-rt") { _ in Shared(lines: lines, level: level) }
            let client = try MQTTClient(options: broker.options(clientID: "liblog-rt"), logger: logger, loop: loop)
            try await client.connect()
            try await client.publish(topic: "liblog/a", payload: [1], qos: .atLeastOnce)
            #expect(lines.items.withLock { $0 }.isEmpty)
            level.value.withLock { $0 = .debug }
            try await client.publish(topic: "liblog/b", payload: [1], qos: .atLeastOnce)
            try await client.publish(topic: "liblog/c", payload: [1], qos: .atLeastOnce)
            #expect(lines.items.withLock { $0 }.contains { $0.contains("sending PUBLISH") && $0.contains("liblog/c") },
                    "\(lines.items.withLock { $0 })")
            level.value.withLock { $0 = .info }
            try await client.publish(topic: "liblog/d", payload: [1], qos: .atLeastOnce)
            try await client.publish(topic: "liblog/e", payload: [1], qos: .atLeastOnce)
            #expect(!lines.items.withLock { $0 }.contains { $0.contains("liblog/e") }, "\(lines.items.withLock { $0 })")
            await client.disconnect()
        }
    }

    @Test(arguments: [Logger.Level.debug, .info])
    func libraryLinesOnlyAtDebug(level: Logger.Level) async throws {
        try await withBroker(loopName: "mqtt-liblog") { broker, loop in
            let lines = Lines()
            let logger = Logger(label: "liblog") { _ in Recorder(lines: lines, logLevel: level) }
            let client = try MQTTClient(options: broker.options(clientID: "liblog-\(level)"), logger: logger, loop: loop)
            try await client.connect()
            try await client.publish(topic: "liblog/x", payload: [1], qos: .atLeastOnce)
            await client.disconnect()
            let seen = lines.items.withLock { $0 }
            if level == .debug {
                #expect(seen.contains { $0.contains("sending CONNECT") }, "\(seen)")
                #expect(seen.contains { $0.contains("sending PUBLISH") }, "\(seen)")
            } else {
                #expect(seen.isEmpty, "\(seen)")
            }
        }
    }
}
