import BinaryCoding
import BridgeConfig
@testable import BridgeCore
import Testing

/// The node's state of several bridges on one broker as one value (``ClusterNodeState``): where a
/// command goes, what the sessions' ownership becomes, and a frozen node's resync.
struct ClusterNodeStateTests {
    static let t0 = BridgeInstant.now
    /// After the claims settled (`claim_settle`, 1 s by default).
    static let t1 = t0 + .seconds(2)

    func state(claims: [String: OwnershipClaim] = [:]) -> ClusterNodeState {
        var s = ClusterNodeState(node: "a", settings: ClusterSettings())
        s.withView { v in
            v.node("a", online: true)
            v.node("b", online: true)
            for (device, claim) in claims { _ = v.receive(claim, for: device, at: Self.t0) }
        }
        return s
    }

    func command() -> PendingCommand { PendingCommand(payload: .command(["command": "ping"]), deadline: Self.t0 + .seconds(5)) }

    @Test func commandsGoToTheOwnerAndWaitWhenNobodyOwnsTheDevice() {
        var s = state(claims: ["mine": OwnershipClaim(node: "a", epoch: 1), "theirs": OwnershipClaim(node: "b", epoch: 1)])
        #expect(s.route(command(), device: "mine", at: Self.t1) == .submit)
        #expect(s.route(command(), device: "theirs", at: Self.t1) == .other("b"))
        #expect(s.route(command(), device: "nobodys", at: Self.t1) == .hold(asOwner: false))
        #expect(s.held["nobodys"]?.count == 1)
        for _ in 1 ..< BridgeDefaults.heldCommands { _ = s.route(command(), device: "nobodys", at: Self.t1) }
        #expect(s.route(command(), device: "nobodys", at: Self.t1) == .full(asOwner: false), "bounded")
    }

    @Test func aStaleViewHoldsTheOwnersCommandsAndTheFreshOneDeliversThem() {
        var s = state(claims: ["mine": OwnershipClaim(node: "a", epoch: 1)])
        s.disconnected = true
        #expect(s.route(command(), device: "mine", at: Self.t1) == .hold(asOwner: true))
        let device = ClusterNodeState.Running(id: "mine", session: ObjectIdentifier(ClusterNodeStateTests.Token()))
        #expect(s.update([device], at: Self.t1).isEmpty, "a stale view changes nothing")
        s.disconnected = false
        let actions = s.update([device], at: Self.t1)
        guard case let .activate(id, held)? = actions.first else { Issue.record("\(actions)"); return }
        #expect(id == "mine" && held.count == 1)
        #expect(s.heldAsOwner.isEmpty && s.active["mine"] == device.session)
    }

    /// b's claim of epoch 1 settled before a's of the same epoch came (a claimed at the same
    /// time and held every command meanwhile): b loses to the lower id and leaves its waiting
    /// commands to a, unanswered. Lost to a later epoch (a took it after b's claim was in force,
    /// dropping the commands as b's), b answers what it held.
    @Test func aClaimLostAtItsOwnEpochLeavesTheCommandsToTheWinner() {
        for (winner, holds) in [(OwnershipClaim(node: "a", epoch: 1), true), (OwnershipClaim(node: "a", epoch: 2), false)] {
            var s = ClusterNodeState(node: "b", settings: ClusterSettings())
            s.withView { v in
                v.node("a", online: true)
                _ = v.receive(OwnershipClaim(node: "b", epoch: 1), for: "cam", at: Self.t0)
            }
            let device = ClusterNodeState.Running(id: "cam", session: ObjectIdentifier(ClusterNodeStateTests.Token()))
            guard case .activate? = s.update([device], at: Self.t1).first else { Issue.record("b never owned cam"); continue }
            s.disconnected = true
            #expect(s.route(command(), device: "cam", at: Self.t1) == .hold(asOwner: true))
            s.disconnected = false
            _ = s.withView { $0.receive(winner, for: "cam", at: Self.t1) }
            let actions = s.update([device], at: Self.t1)
            guard case let .lost(id, to, dropped, refused, deactivate, winnerHolds)? = actions.first else {
                Issue.record("\(winner): \(actions)")
                continue
            }
            #expect(id == "cam" && to == "a" && deactivate)
            #expect(winnerHolds == holds, "\(winner)")
            #expect((dropped.count, refused.count) == (holds ? (1, 0) : (0, 1)), "\(winner)")
            #expect(s.active["cam"] == nil && s.activeEpoch["cam"] == nil)
        }
    }

    @Test func heldCommandsPastTheirDeadlineAreTakenOnce() {
        var s = state()
        _ = s.route(command(), device: "nobodys", at: Self.t0)
        #expect(s.takeDue(at: Self.t0 + .seconds(1)).unowned.isEmpty)
        #expect(s.takeDue(at: Self.t0 + .seconds(6)).unowned.count == 1)
        #expect(s.takeDue(at: Self.t0 + .seconds(7)).unowned.isEmpty)
    }

    @Test func aFrozenNodeResyncsAndSaysSoOnce() {
        var s = state()
        s.lastTick = Self.t0
        #expect(s.noticeStall(at: Self.t0 + .milliseconds(500)) == nil)
        #expect(s.noticeStall(at: Self.t0 + .seconds(2)) == .seconds(2))
        #expect(s.suspended(at: Self.t0 + .seconds(2)) && s.republishDue)
        s.lastTick = Self.t0
        #expect(s.noticeStall(at: Self.t0 + .seconds(2) + .milliseconds(1)) == nil, "suspended already: not news")
    }

    final class Token {}

    /// Reports go out every `seen_interval` (5 s by default), and at once when the node sees a
    /// device its last report did not give (docs/scale-out.md, "Cold start": the others wait for
    /// it before they first claim the device).
    @Test func aReportGoesOutEverySeenIntervalAndAtOnceForANewDevice() {
        var s = state()
        let camera: Set<String> = ["C0:FF:EE:00:00:01"]
        var due: [(Bool, Bool, String)] = []
        due.append((s.reportDue([], at: Self.t0), true, "the first report at once"))
        due.append((s.reportDue([], at: Self.t0 + .seconds(1)), false, ""))
        due.append((s.reportDue(camera, at: Self.t0 + .milliseconds(1100)), true, "a device the last report did not give"))
        due.append((s.reportDue(camera, at: Self.t0 + .milliseconds(1200)), false, "given already"))
        due.append((s.reportDue([], at: Self.t0 + .seconds(2)), false, "one fewer is no news"))
        due.append((s.reportDue([], at: Self.t0 + .milliseconds(6100)), true, "seen_interval after the last one"))
        due.append((s.reportDue(camera, at: Self.t0 + .milliseconds(6200)), true, "back after the report that lacked it"))
        for (i, (got, wanted, why)) in due.enumerated() { #expect(got == wanted, "report \(i + 1): \(why)") }
    }
}
