import BridgeConfig
import Foundation
import Synchronization

// What the node's adapter sees and holds: the continuous scan behind its reports, and the links
// left behind by a bridge of this host that was killed.

extension ClusterExtension {
    /// How long a link this node does not use must last before the node closes it: longer than
    /// bluetoothd's own Disconnect (about 2 s, spec/bluez.md behaviour 5), so that the link of a
    /// session of this node that is closing it is not taken for one left behind.
    static let unusedLinkGrace: Duration = .seconds(3)

    /// Closes the links this node's adapter holds to devices another node owns, or nobody, that
    /// no session of this node uses: left by a bridge of this host that was killed (bluetoothd
    /// keeps an LE link after the client that made it is gone, docs/bluez.md "The real stack").
    /// While such a link lasts, a device that stops advertising when connected (most do) is out
    /// of every other node's reach; the node that comes back on this host frees it. Looked for
    /// once a second; a link closes after ``unusedLinkGrace``, one at a time, in the ownership
    /// jobs' order.
    func closeUnusedLinks(_ devices: [(id: String, address: String, session: DeviceSession)], at now: BridgeInstant) {
        guard let control = bridge.central.adapterControl else { return }
        let due = state.withLock { s -> Bool in
            if let last = s.lastUnusedLinkCheck, now - last < .seconds(1) { return false }
            s.lastUnusedLinkCheck = now
            return true
        }
        guard due else { return }
        for d in devices {
            let owner: String?
            let (role, active) = state.withLock { s in (s.view.role(of: d.id, at: now), s.active[d.id] != nil || s.draining.contains(d.id)) }
            switch role {
            case let .other(node): owner = node
            case .unowned: owner = nil
            case .owner, .handingOver, .claiming:
                state.withLock { $0.unusedLinks[d.id] = nil }
                continue
            }
            // The session's own connect or disconnect under way: that link is its to finish.
            let used = active || d.session.linked.withLock { $0 } || d.session.linkDriver.signal.isBusy
            guard !used, control.holdsUnusedLink(to: d.address) else {
                state.withLock { $0.unusedLinks[d.id] = nil }
                continue
            }
            let close = state.withLock { s -> Bool in
                let since = s.unusedLinks[d.id] ?? now
                s.unusedLinks[d.id] = since
                return now - since >= Self.unusedLinkGrace && s.closingLinks.insert(d.id).inserted
            }
            guard close else { continue }
            logger.warning("""
                cluster: closing a link this node's adapter holds to a device it does not own (left by a bridge that \
                stopped without closing it; while it lasts the device does not advertise to the node that owns it)
                """,
                metadata: ["device": "\(d.id)", "owner": "\(owner ?? "none")"])
            let (id, address) = (d.id, d.address)
            jobSink.yield {
                defer {
                    self.state.withLock { s in
                        s.closingLinks.remove(id)
                        s.unusedLinks[id] = nil
                    }
                }
                switch self.state.withLock({ $0.view.role(of: id, at: self.now) }) {
                case .other, .unowned: break
                case .owner, .handingOver, .claiming: return  // this node's now: its session adopts the link
                }
                do throws(BLEError) {
                    try await control.closeUnusedLink(to: address)
                } catch {
                    self.logger.warning("cluster: closing the link failed", metadata: ["device": "\(id)", "error": "\(error)"])
                }
            }
        }
    }

    /// Scans all the time, for the reports: the RSSI of each configured device this node sees.
    func scan() async {
        guard let adapter = bridge.central.adapterControl else {
            logger.warning("cluster: this Bluetooth central cannot scan; this node reports only its links")
            return
        }
        while !Task.isCancelled {
            do throws(BLEError) {
                let scan = try await adapter.scan()
                await withTaskCancellationHandler {
                    for await ad in scan.advertisements {
                        guard let rssi = ad.rssi else { continue }
                        let address = ad.address.uppercased()
                        let now = self.now
                        state.withLock { $0.local[address] = (rssi, now) }
                    }
                } onCancel: {
                    Task { await scan.stop() }
                }
                await scan.stop()
            } catch {
                logger.warning("cluster: scan failed", metadata: ["error": "\(error)"])
            }
            if Task.isCancelled { break }
            try? await bridge.sleep(Self.scanRetry)
        }
    }
}
