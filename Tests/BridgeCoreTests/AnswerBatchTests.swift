import BinaryCoding
import BridgeStore
import Foundation
import Logging
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// The answers' writes of one turn and the publishes held behind them (``AnswerBatch``): nothing
/// about a staged write is published before it is committed, and publishes keep their order.
@Suite struct AnswerBatchTests {
    func batch(deferred: Bool = true) throws -> (AnswerBatch, FakeMQTT, BridgeStore) {
        let store = try BridgeStore.inMemory()
        let mqtt = FakeMQTT()
        return (AnswerBatch(inner: mqtt, store: store, metrics: BridgeMetrics(), logger: Logger(label: "test"), deferred: deferred),
                mqtt, store)
    }

    func message(_ n: Int) -> OutboundMessage { OutboundMessage(topic: "t/\(n)", payload: [UInt8(n)], qos: 1, retain: false) }

    func entry() -> OutboxEntry {
        OutboxEntry(deviceID: "cam", transaction: nil, command: "{}", status: .sent, createdAt: Date(), deadline: Date())
    }

    @Test func publishesAtOnceWhenNothingIsStaged() throws {
        let (b, mqtt, _) = try batch()
        b.send(message(1))
        #expect(mqtt.sent.map(\.topic) == ["t/1"])
        #expect(b.commit() == false)
    }

    @Test func publishesWaitForTheStagedWritesAndKeepTheirOrder() throws {
        let (b, mqtt, store) = try batch()
        let id = try store.enqueue(entry()).entry.id!
        b.stage([.removeCommand(id), .saveState(deviceID: "cam", json: #"{"a":1}"#, at: 1)])
        b.send(message(1))
        b.send(message(2))
        #expect(mqtt.sent.isEmpty, "published before the writes were committed")
        #expect(try store.pendingCommands().count == 1, "committed before the turn ended")
        #expect(b.commit())
        #expect(try store.pendingCommands().isEmpty)
        #expect(try store.states()["cam"] == ["a": 1])
        #expect(mqtt.sent.map(\.topic) == ["t/1", "t/2"])
        b.send(message(3))
        #expect(mqtt.sent.map(\.topic) == ["t/1", "t/2", "t/3"], "nothing staged any more: at once")
    }

    @Test func aDevicesNewerStateReplacesItsStagedOlderOne() throws {
        let (b, _, store) = try batch()
        b.stage([.saveState(deviceID: "cam", json: #"{"a":1}"#, at: 1)])
        b.stage([.saveState(deviceID: "other", json: #"{"b":1}"#, at: 1)])
        b.stage([.saveState(deviceID: "cam", json: #"{"a":2}"#, at: 2)])
        b.commit()
        #expect(try store.states() == ["cam": ["a": 2], "other": ["b": 1]])
    }

    @Test func endOfTurnWorkRunsAtTheCommitOrAtOnceWithoutAHook() throws {
        let (deferred, _, _) = try batch(deferred: true)
        let ran = Mutex(0)
        deferred.atEndOfTurn { ran.withLock { $0 += 1 } }
        #expect(ran.withLock { $0 } == 0)
        #expect(deferred.commit())
        #expect(ran.withLock { $0 } == 1)
        let (direct, _, _) = try batch(deferred: false)
        direct.atEndOfTurn { ran.withLock { $0 += 1 } }
        #expect(ran.withLock { $0 } == 2)
    }
}
