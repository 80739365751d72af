import BinaryCoding
import BridgeStore
import Foundation
import Testing
@testable import BridgeCore

/// What a driver's outputs come to, without a session: the queue and state are values.
@Suite struct OutputEffectsTests {
    let t0 = BridgeInstant.now
    let date = Date(timeIntervalSince1970: 1_700_000_000)

    /// A queue whose command (outbox row 7) awaits the answer `ping`.
    func awaiting() -> CommandQueue {
        var q = CommandQueue()
        q.append(PendingCommand(payload: .command(["command": "ping"]), outboxID: 7, transaction: "t", deadline: t0 + .seconds(60)))
        guard case let .send(c) = q.next(busy: false) else { return q }
        _ = q.start(c, DeviceRequest(writes: [], expect: "ping"), commandTimeout: .seconds(5), now: t0)
        return q
    }

    @Test func anAnswerRemovesItsRowWithTheNewStateThenPublishesInOrder() {
        var q = awaiting()
        var state = DeviceState(["battery": 50])
        let outputs: [DriverOutput] = [.event(["hello": 1]), .response(key: "ping", result: .success("pong")),
                                       .state(["battery": 40]), .malformed("junk"), .response(key: "other", result: .success(nil))]
        let e = OutputEffects(outputs, answering: nil, device: "d", queue: &q, state: &state, at: date)
        guard let merged = e.state else { Issue.record("no state"); return }
        #expect(e.writes == [.removeCommand(7), .saveState(deviceID: "d", json: merged.json, at: date.timeIntervalSince1970)])
        #expect(!merged.hardwareChanged && state.values["battery"] == 40)
        #expect(e.steps.count == 4)
        guard case .event = e.steps[0], case let .answer(cmd, .success(data)) = e.steps[1], case .malformed("junk") = e.steps[2],
              case .unmatched(key: "other") = e.steps[3] else { Issue.record("steps: \(e.steps)"); return }
        #expect(cmd.outboxID == 7 && data == "pong")
        #expect(q.inFlight == nil, "the answered command left the queue")
    }

    @Test func nothingChangedNothingWritten() {
        var q = CommandQueue()
        var state = DeviceState(["battery": 50])
        let e = OutputEffects([.state(["battery": 50]), .deviceError(CommandError(.authFailed, "no"))], answering: nil, device: "d",
                              queue: &q, state: &state, at: date)
        #expect(e.writes.isEmpty && e.state == nil)
        guard case .deviceError = e.steps.first else { Issue.record("steps: \(e.steps)"); return }
    }

    @Test func aReadAnswersWithItsCharacteristicElseItsState() {
        var q = CommandQueue()
        var state = DeviceState([:])
        let read = PendingCommand(payload: .command(["get": "level"]), outboxID: 3, deadline: t0 + .seconds(60))
        let e = OutputEffects([.characteristic(topic: "level", value: 42), .state(["level": 42])], answering: read, device: "d",
                              queue: &q, state: &state, at: date)
        #expect(e.readData == 42)
        #expect(e.writes.first == .removeCommand(3))
        var q2 = CommandQueue()
        let f = OutputEffects([.state(["level": 5])], answering: read, device: "d", queue: &q2, state: &state, at: date)
        #expect(f.readData == ["level": 5])
    }

    @Test func handshakeStepsGoAheadOfTheQueue() {
        var q = CommandQueue()
        q.append(PendingCommand(payload: .command(["command": "ping"]), deadline: t0 + .seconds(60)))
        var state = DeviceState([:])
        let step = DeviceRequest(writes: [.init(CharacteristicID("FFF1"), [9])])
        _ = OutputEffects([.request(step)], answering: nil, device: "d", queue: &q, state: &state, at: date)
        guard case let .send(next) = q.next(busy: false), case let .internal(r) = next.payload else { Issue.record("not the step"); return }
        #expect(r == step)
    }
}
