import BinaryCoding
import BridgeConfig
import Foundation

// A passive device's session (`profile: advertisement`): no link, no connect loop, no writer.
// The bridge's discovery hands it the device's advertisements (``DeviceSession/heard(_:)``, the
// newest waiting one wins); its profile's ``PassiveDecoder`` reads them and ``PassiveTracker``
// decides. The state goes out the way a notification's does (``process(_:from:answering:)``:
// merged, stored, published retained on `<base>/<device>`), availability and RSSI as for any
// device; only the owner publishes (several bridges: the cluster's claims, docs/scale-out.md).

extension DeviceSession {
    struct Passive: Sendable {
        /// The profile's decoder, with the last advertisement it read (a repeat is not decoded again).
        var decoder: LastDecoded
        var tracker: PassiveTracker
        /// The last decode error reported on `bridge/event` (they are counted every time).
        var lastReported: BridgeInstant?

        init(decoder: any PassiveDecoder, config: DeviceConfig, state: JSONObject, lastCounter: UInt32?) {
            self.decoder = LastDecoded(decoder)
            tracker = PassiveTracker(minInterval: config.minInterval, silence: config.availabilityTimeout, state: state, lastCounter: lastCounter)
        }
    }

    /// One decode error per device per this long reaches `bridge/event` (all are counted).
    static let passiveErrorReportInterval: Duration = .seconds(60)

    /// Hands the device's advertisement to the session (any thread): it replaces one still
    /// waiting, so a device that advertises faster than its session runs costs one slot.
    nonisolated func heard(_ ad: Advertisement) {
        let wasEmpty = heardSlot.withLock { slot in
            defer { slot = ad }
            return slot == nil
        }
        if wasEmpty { sink.yield(.advertised, inline: true) }
    }

    /// The advertisement waiting in the slot: decoded, judged, published.
    func advertised() {
        guard let ad = heardSlot.withLock({ slot in defer { slot = nil }; return slot }), var p = passive, link.isOwned else { return }
        let now = output.clock.now()
        let reading: PassiveReading?
        do { reading = try p.decoder.decode(ad) } catch {
            if p.lastReported.map({ now - $0 >= Self.passiveErrorReportInterval }) ?? true {
                p.lastReported = now
                _ = process([.malformed("advertisement from \(ad.address): \(error.message)")], from: nil)
            } else {
                metrics.decodeErrors.increment()
            }
            passive = p
            return
        }
        guard let reading else { passive = p; return }  // not of the device's format (another frame type)
        let wasOnline = p.tracker.online, counterBefore = p.tracker.lastCounter
        let outcome = p.tracker.accept(reading, at: now)
        passive = p
        if let check = p.decoder.decoder.keyCheck, let counter = p.tracker.lastCounter, counter != counterBefore {
            // Staged: committed with the reading's state in one transaction when it has one.
            output.batch.stage([.saveCounter(deviceID: id, counter: counter, keyCheck: check)], timed: false)
        }
        if !wasOnline, p.tracker.online { publishAvailability(true) }
        // The RSSI goes out with the reading's state when there is one (one publish), else on its
        // own when it moved enough (``updateRSSI(_:)``).
        var rssi: JSONObject = [:]
        if let r = ad.rssi {
            lastRSSI = r
            if state.rssiIsNews(r) { rssi["rssi"] = .int(Int64(r)) }
        }
        switch outcome {
        case var .publish(values):
            values.merge(rssi)
            publishReading(values)
        case let .replayed(counter):
            metrics.decodeErrors.increment()
            output.logger.debug("replayed advertisement refused", metadata: ["device": "\(id)", "counter": "\(counter)"])
            return
        case .held, .unchanged, .repeated:
            if !rssi.isEmpty { commitState(rssi, at: Date()) }
        }
    }

    /// Publishes a reading's values as the state; a field the state did not have yet (a BTHome
    /// sensor's fields are known once it sends them) republishes the device's Home Assistant
    /// discovery, which has an entity per field of the state.
    func publishReading(_ values: JSONObject) {
        let known = Set(state.values.keys)
        _ = process([.state(values)], from: nil)
        if values.keys.contains(where: { !known.contains($0) }) { output.deviceInfoChanged(config, state.values) }
    }

    /// The bridge's timer, for a passive device (at ``PassiveTracker/nextDue``): a held state
    /// whose `min_interval` passed, the silence.
    func passiveTimers() {
        guard var p = passive, link.isOwned else { return }
        let due = p.tracker.tick(at: output.clock.now())
        passive = p
        for d in due {
            switch d {
            case let .publish(values): publishReading(values)
            case .offline: publishAvailability(false)
            }
        }
    }
}
