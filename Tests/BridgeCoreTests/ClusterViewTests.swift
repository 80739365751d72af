import BinaryCoding
@testable import BridgeCore
import Testing

/// The ownership rules of several bridges on one broker (docs/scale-out.md), on the pure view.
struct ClusterViewTests {
    static let t0 = BridgeInstant.now
    static let parameters = ClusterView.Parameters(hysteresis: 6, handoverAfter: .seconds(10), lostAfter: .seconds(30),
                                                   claimSettle: .seconds(1), seenInterval: .zero)
    static let address = "C0:FF:EE:00:00:01"

    func view(_ me: String, online others: [String] = ["b"]) -> ClusterView {
        var v = ClusterView(me: me, parameters: Self.parameters)
        for n in others { v.node(n, online: true) }
        return v
    }

    func sees(_ rssi: Int, at: BridgeInstant = t0, connected: Bool = false) -> [String: ClusterView.Sighting] {
        [Self.address: .init(rssi: rssi, at: at, connected: connected)]
    }

    @Test func claimRoundTripsThroughJSON() throws {
        let claims = [OwnershipClaim(node: "a", epoch: 3), OwnershipClaim(node: nil, epoch: 4), OwnershipClaim(node: "a", epoch: 3, handoverTo: "b")]
        for c in claims {
            #expect(OwnershipClaim(json: try JSONValue(parsing: Array(c.json.jsonText.utf8))) == c)
        }
        #expect(OwnershipClaim(node: nil, epoch: 4).json.jsonText == #"{"node":null,"epoch":4}"#)
        #expect(OwnershipClaim(json: try JSONValue(parsing: Array(#"{"node":"a"}"#.utf8))) == nil, "no epoch")
        #expect(OwnershipClaim(json: try JSONValue(parsing: Array(#"{"node":7,"epoch":1}"#.utf8))) == nil, "node not a string")
    }

    /// A retained `{"node":null,"epoch":9223372036854775807}` made every node trap on `epoch + 1`
    /// at every start (issue 20): epochs out of 0…2^53 are garbage, and the next epoch never
    /// goes past 2^53.
    @Test func epochsAreBoundedAndTheNextOneNeverOverflows() throws {
        func claim(_ text: String) throws -> OwnershipClaim? { OwnershipClaim(json: try JSONValue(parsing: Array(text.utf8))) }
        #expect(OwnershipClaim.maxEpoch == 9_007_199_254_740_992)
        #expect(try claim(#"{"node":null,"epoch":9223372036854775807}"#) == nil)
        #expect(try claim(#"{"node":"a","epoch":9007199254740993}"#) == nil)
        #expect(try claim(#"{"node":"a","epoch":-1}"#) == nil)
        #expect(try claim(#"{"node":"a","epoch":18446744073709551615}"#) == nil)
        #expect(try claim(#"{"node":"a","epoch":1e300}"#) == nil)
        #expect(try claim(#"{"node":null,"epoch":9007199254740992}"#) == OwnershipClaim(node: nil, epoch: OwnershipClaim.maxEpoch))
        // At the bound the next epoch stays there: released, claimed, released again, no trap.
        var a = view("a")
        a.report(from: "a", sees(-50))
        a.receive(OwnershipClaim(node: nil, epoch: OwnershipClaim.maxEpoch), for: "cam", at: Self.t0)
        #expect(a.decide("cam", address: Self.address, at: Self.t0) == .claim(OwnershipClaim(node: "a", epoch: OwnershipClaim.maxEpoch)))
        a.receive(OwnershipClaim(node: "a", epoch: OwnershipClaim.maxEpoch), for: "cam", at: Self.t0)
        a.report(from: "a", [:])
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(60)) == .release(OwnershipClaim(node: nil, epoch: OwnershipClaim.maxEpoch)))
        #expect(OwnershipClaim(node: "a", epoch: OwnershipClaim.maxEpoch - 1).nextEpoch == OwnershipClaim.maxEpoch)
        #expect(OwnershipClaim(node: "a", epoch: 41).nextEpoch == 42)
    }

    /// Every number of a node's report is range-checked: garbage is refused whole.
    @Test func reportsWithNumbersOutOfRangeAreRefused() throws {
        func parse(_ text: String) throws -> Result<[String: ClusterView.Sighting], ClusterView.ReportError> {
            ClusterView.sightings(try JSONValue(parsing: Array(text.utf8)).objectValue ?? [:], at: Self.t0)
        }
        let ok = try parse(#"{"c0:ff:ee:00:00:01":{"rssi":-52,"age_ms":800,"connected":true}}"#)
        #expect(ok == .success([Self.address: .init(rssi: -52, at: Self.t0 - .milliseconds(800), connected: true)]))
        #expect(try parse(#"{"C0:FF:EE:00:00:01":{"rssi":-127}}"#) == .success([Self.address: .init(rssi: -127, at: Self.t0, connected: false)]))
        for (text, error) in [
            (#"{"A":{"rssi":9223372036854775807,"age_ms":0}}"#, "A.rssi: 9223372036854775807 is not a whole number of dBm in -127…20"),
            (#"{"A":{"rssi":-1e300}}"#, "A.rssi: -1e+300 is not a whole number of dBm in -127…20"),
            (#"{"A":{"rssi":21}}"#, "A.rssi: 21 is not a whole number of dBm in -127…20"),
            (#"{"A":{"rssi":-50.5}}"#, "A.rssi: -50.5 is not a whole number of dBm in -127…20"),
            (#"{"A":{"age_ms":5}}"#, "A.rssi: missing is not a whole number of dBm in -127…20"),
            (#"{"A":{"rssi":-50,"age_ms":9223372036854775807}}"#, "A.age_ms: 9223372036854775807 is not a whole number of milliseconds in 0…31536000000"),
            (#"{"A":{"rssi":-50,"age_ms":-9223372036854775808}}"#, "A.age_ms: -9223372036854775808 is not a whole number of milliseconds in 0…31536000000"),
            (#"{"A":{"rssi":-50,"age_ms":"soon"}}"#, #"A.age_ms: "soon" is not a whole number of milliseconds in 0…31536000000"#),
            (#"{"A":7}"#, #"A: expected {"rssi","age_ms","connected"}"#),
        ] {
            #expect(try parse(text) == .failure(ClusterView.ReportError(error)), "\(text)")
        }
    }

    @Test func competingClaimsResolveTheSameWayInEitherOrder() {
        let a = OwnershipClaim(node: "a", epoch: 2)
        let b = OwnershipClaim(node: "b", epoch: 2)
        var first = view("c", online: ["a", "b"])
        first.receive(a, for: "cam", at: Self.t0)
        first.receive(b, for: "cam", at: Self.t0)
        var second = view("c", online: ["a", "b"])
        second.receive(b, for: "cam", at: Self.t0)
        second.receive(a, for: "cam", at: Self.t0)
        #expect(first.owner(of: "cam") == "a")
        #expect(second.owner(of: "cam") == "a")
        // A higher epoch wins whatever its node; an older one is ignored.
        let newer = first.receive(OwnershipClaim(node: "b", epoch: 3), for: "cam", at: Self.t0)
        let older = first.receive(OwnershipClaim(node: "a", epoch: 2), for: "cam", at: Self.t0)
        #expect(newer && !older)
        #expect(first.owner(of: "cam") == "b")
    }

    @Test func theNodeThatSeesItBestClaimsAndSettlesFirst() {
        var a = view("a")
        a.report(from: "a", sees(-50))
        a.report(from: "b", sees(-80))
        var b = view("b", online: ["a"])
        b.report(from: "a", sees(-50))
        b.report(from: "b", sees(-80))
        #expect(b.decide("cam", address: Self.address, at: Self.t0) == nil, "b sees it worse")
        let decision = a.decide("cam", address: Self.address, at: Self.t0)
        #expect(decision == .claim(OwnershipClaim(node: "a", epoch: 1)))
        a.receive(OwnershipClaim(node: "a", epoch: 1), for: "cam", at: Self.t0)
        b.receive(OwnershipClaim(node: "a", epoch: 1), for: "cam", at: Self.t0)
        #expect(a.role(of: "cam", at: Self.t0) == .claiming)
        #expect(a.role(of: "cam", at: Self.t0 + .seconds(1)) == .owner)
        #expect(b.role(of: "cam", at: Self.t0) == .other("a"))
        // Equal signals: the lower node id, on every node.
        var c = view("b", online: ["a"])
        c.report(from: "a", sees(-60))
        c.report(from: "b", sees(-60))
        #expect(c.decide("cam", address: Self.address, at: Self.t0) == nil)
    }

    @Test func aStaleSightingOrAnOfflineNodeDoesNotCount() {
        var a = view("a")
        a.report(from: "b", sees(-40))
        a.report(from: "a", sees(-70, at: Self.t0 + .seconds(40)))
        // b's sighting is 40 s old at t0+40 (lost_after 30 s): a claims.
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(40)) == .claim(OwnershipClaim(node: "a", epoch: 1)))
        var fresh = view("a")
        fresh.report(from: "b", sees(-40))
        fresh.report(from: "a", sees(-70))
        fresh.node("b", online: false)
        #expect(fresh.decide("cam", address: Self.address, at: Self.t0) == .claim(OwnershipClaim(node: "a", epoch: 1)))
    }

    @Test func theOwnersWillMakesTheDeviceUnownedAndTheNextClaimRaisesTheEpoch() {
        var b = view("b", online: ["a"])
        b.receive(OwnershipClaim(node: "a", epoch: 4), for: "cam", at: Self.t0)
        b.report(from: "b", sees(-80))
        #expect(b.decide("cam", address: Self.address, at: Self.t0) == nil)
        b.node("a", online: false)  // a's Will
        #expect(b.role(of: "cam", at: Self.t0) == .unowned)
        #expect(b.decide("cam", address: Self.address, at: Self.t0) == .claim(OwnershipClaim(node: "b", epoch: 5)))
        // a comes back with its old claim retained: b's newer epoch stands.
        b.node("a", online: true)
        b.receive(OwnershipClaim(node: "b", epoch: 5), for: "cam", at: Self.t0)
        let stale = b.receive(OwnershipClaim(node: "a", epoch: 4), for: "cam", at: Self.t0)
        #expect(!stale)
        #expect(b.owner(of: "cam") == "b")
    }

    @Test func handoverNeedsTheHysteresisForTheWholeHandoverTime() {
        var a = view("a")
        a.receive(OwnershipClaim(node: "a", epoch: 1), for: "cam", at: Self.t0)
        a.report(from: "a", sees(-60, at: Self.t0, connected: true))
        // 5 dB better is within the hysteresis: nothing.
        a.report(from: "b", sees(-55))
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(20)) == nil)
        // At second `t`: a, connected, still at -60; b at `rssi`; what a decides.
        func step(b rssi: Int, at t: Int64) -> ClusterView.Decision? {
            let now = Self.t0 + .seconds(t)
            a.report(from: "b", sees(rssi, at: now))
            a.report(from: "a", sees(-60, at: now, connected: true))
            return a.decide("cam", address: Self.address, at: now)
        }
        // 6 dB better: the clock starts; before handover_after nothing, after it a hands over.
        #expect(step(b: -54, at: 20) == nil)
        #expect(step(b: -54, at: 29) == nil)
        // It dips back within the hysteresis once: the clock starts again.
        #expect(step(b: -57, at: 29) == nil)
        #expect(step(b: -50, at: 30) == nil)
        let d = step(b: -50, at: 40)
        #expect(d == .handOver(OwnershipClaim(node: "a", epoch: 1, handoverTo: "b")))
        a.receive(OwnershipClaim(node: "a", epoch: 1, handoverTo: "b"), for: "cam", at: Self.t0 + .seconds(40))
        #expect(a.role(of: "cam", at: Self.t0 + .seconds(40)) == .handingOver(to: "b"))
        // Others hold commands meanwhile; the target going offline makes the owner keep it.
        var b = view("b", online: ["a"])
        b.receive(OwnershipClaim(node: "a", epoch: 1, handoverTo: "b"), for: "cam", at: Self.t0)
        #expect(b.role(of: "cam", at: Self.t0) == .unowned)
        a.node("b", online: false)
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(41)) == .keep(OwnershipClaim(node: "a", epoch: 1)))
    }

    /// A node on the owner's Bluetooth daemon that never heard the device advertise (it was
    /// linked through the owner's adapter first) sees it "in reach, no RSSI": that takes it when
    /// the owner dies, and never takes it from a live owner, even with `hysteresis: 0`.
    @Test func aSightingWithoutRSSIClaimsAnUnownedDeviceButNeverWinsAHandover() {
        var p = Self.parameters
        p.hysteresis = 0
        var a = ClusterView(me: "a", parameters: p)
        a.node("b", online: true)
        a.receive(OwnershipClaim(node: "a", epoch: 1), for: "cam", at: Self.t0)
        let nearby = ClusterExtension.ownSightings([Self.address], linked: [], local: [:], lostAfter: .seconds(30), at: Self.t0) {
            $0 == Self.address
        }
        #expect(nearby == sees(ClusterView.Sighting.noRSSI, at: Self.t0))
        for t in [0, 20, 40] as [Int64] {
            let now = Self.t0 + .seconds(t)
            a.report(from: "a", sees(ClusterView.Sighting.noRSSI, at: now, connected: true))
            a.report(from: "b", sees(ClusterView.Sighting.noRSSI, at: now))
            #expect(a.decide("cam", address: Self.address, at: now) == nil, "at \(t) s")
        }
        // The owner's Will: b, the only node with a sighting, claims it.
        var b = ClusterView(me: "b", parameters: p)
        b.node("a", online: true)
        b.receive(OwnershipClaim(node: "a", epoch: 1), for: "cam", at: Self.t0)
        b.report(from: "b", nearby)
        b.node("a", online: false)
        #expect(b.decide("cam", address: Self.address, at: Self.t0) == .claim(OwnershipClaim(node: "b", epoch: 2)))
    }

    /// What a node reports of itself: a link (connected, at now), a recent scan, else a link of
    /// its daemon through another adapter (no RSSI, at now); a stale scan alone is nothing. The
    /// daemon's cache is asked only about a device neither linked nor heard.
    @Test func ownSightingsPreferALinkThenARecentScanThenAnotherAdaptersLink() {
        let now = Self.t0 + .seconds(100)
        let (linked, heard, nearbyOnly, stale, none) = ("01", "02", "03", "04", "05")
        let local: [String: (rssi: Int, at: BridgeInstant)] = [
            linked: (-60, Self.t0), heard: (-70, now - .seconds(5)), stale: (-50, now - .seconds(31)),
        ]
        var asked: [String] = []
        let out = ClusterExtension.ownSightings([linked, heard, nearbyOnly, stale, none], linked: [linked], local: local,
                                                lostAfter: .seconds(30), at: now) {
            asked.append($0)
            return [linked, heard, nearbyOnly].contains($0)
        }
        #expect(asked == [nearbyOnly, stale, none])
        #expect(out[linked] == .init(rssi: -60, at: now, connected: true))
        #expect(out[heard] == .init(rssi: -70, at: now - .seconds(5), connected: false))
        #expect(out[nearbyOnly] == .init(rssi: ClusterView.Sighting.noRSSI, at: now, connected: false))
        #expect(out[stale] == nil && out[none] == nil && out.count == 3)
    }

    @Test func anOwnerThatLostTheDeviceReleasesIt() {
        var a = view("a")
        a.receive(OwnershipClaim(node: "a", epoch: 2), for: "cam", at: Self.t0)
        a.report(from: "a", [:])
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(29)) == nil, "just claimed: give it lost_after")
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(31)) == .release(OwnershipClaim(node: nil, epoch: 3)))
        a.receive(OwnershipClaim(node: nil, epoch: 3), for: "cam", at: Self.t0 + .seconds(31))
        #expect(a.role(of: "cam", at: Self.t0 + .seconds(31)) == .unowned)
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(31)) == nil, "nobody sees it: nobody claims")
    }

    @Test func theLeaderIsTheLowestOnlineNode() {
        var b = view("b", online: ["a", "c"])
        #expect(b.leader == "a")
        b.node("a", online: false)
        #expect(b.leader == "b")
    }

    /// Cold start (issue 22 item 8, docs/scale-out.md "Cold start"): the first claim of a device
    /// waits until every other online node has reported — a report that gives the device, or any
    /// report made since the wait began — so the node that sees it best claims it first.
    @Test func theFirstClaimWaitsForEveryOnlineNodesReport() {
        var p = Self.parameters
        p.seenInterval = .seconds(5)
        // A (−80) has only its own sighting and B's report made before it began to wait, without
        // the device: it waits. B's next report gives it at −50: A never claims.
        var a = ClusterView(me: "a", parameters: p)
        a.node("b", online: true)
        a.node("c", online: true)
        a.report(from: "b", [:])
        a.report(from: "a", sees(-80))
        #expect(a.decide("cam", address: Self.address, at: Self.t0) == nil, "b and c have not reported since")
        a.report(from: "c", [:])
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(1)) == nil, "b has not reported since")
        a.report(from: "b", sees(-50, at: Self.t0 + .seconds(2)))
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(2)) == nil, "b sees it better")
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(9)) == nil, "b sees it better, however long")

        // B (−50): A's report gives the device (−80), C reported (nothing) since B began to wait.
        var b = ClusterView(me: "b", parameters: p)
        b.node("a", online: true)
        b.node("c", online: true)
        b.report(from: "b", sees(-50))
        b.report(from: "a", sees(-80))
        #expect(b.decide("cam", address: Self.address, at: Self.t0) == nil, "c has not reported")
        b.report(from: "c", [:])
        #expect(b.decide("cam", address: Self.address, at: Self.t0 + .milliseconds(300)) == .claim(OwnershipClaim(node: "b", epoch: 1)))

        // Alone (no other node online), a node claims at once.
        var alone = ClusterView(me: "a", parameters: p)
        alone.report(from: "a", sees(-80))
        #expect(alone.decide("cam", address: Self.address, at: Self.t0) == .claim(OwnershipClaim(node: "a", epoch: 1)))
    }

    /// The wait is bounded by `seen_interval` (every node reports that often): a node that stays
    /// silent does not keep the device unclaimed; and only the first claim waits — a released
    /// device is claimed at once (the reports are running by then).
    @Test func theFirstClaimsWaitIsBoundedAndOnlyTheFirstClaimWaits() {
        var p = Self.parameters
        p.seenInterval = .seconds(5)
        var a = ClusterView(me: "a", parameters: p)
        a.node("b", online: true)
        a.report(from: "a", sees(-80))
        #expect(a.decide("cam", address: Self.address, at: Self.t0) == nil)
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .milliseconds(4999)) == nil)
        #expect(a.decide("cam", address: Self.address, at: Self.t0 + .seconds(5)) == .claim(OwnershipClaim(node: "a", epoch: 1)))

        var c = ClusterView(me: "a", parameters: p)
        c.node("b", online: true)
        c.report(from: "a", sees(-80))
        c.receive(OwnershipClaim(node: nil, epoch: 3), for: "cam", at: Self.t0)
        #expect(c.decide("cam", address: Self.address, at: Self.t0) == .claim(OwnershipClaim(node: "a", epoch: 4)))
    }
}
