import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Logging
import Synchronization

// `bridge/request/scan`: the scan, its sightings on `<base>/bridge/scan`, and the bridge events.

extension BridgeAPIExtension {
    // MARK: scan

    func scan(_ body: JSONObject, _ reply: Reply) async {
        let seconds: Double, span: Duration
        switch body["seconds"] {
        case nil: (seconds, span) = (30, .seconds(30))
        case let v?:
            // 0 (stop) to 600 s.
            do throws(RequestError) { span = try RequestError.seconds(v, key: "seconds", in: .zero ... .seconds(600)) } catch {
                return reply.error(error.message, code: error.code)
            }
            seconds = v.doubleValue ?? 0
        }
        if span == .zero {
            await stopScan()
            return reply.ok(["scanning": false])
        }
        guard let adapter = central.adapterControl else { return reply.error("this Bluetooth central cannot scan") }
        let until = clock.now() + span
        let (running, generation) = scanning.withLock { s -> (Bool, Int) in
            s.generation += 1
            s.until = until
            return (s.scan != nil, s.generation)
        }
        if !running {
            let scan: BLEScan
            do { scan = try await adapter.scan() } catch {
                scanning.withLock { $0.until = nil }
                return reply.error("scan: \(error)")
            }
            scanning.withLock { $0.scan = scan }
            spawnSink.yield(.job { await self.publishSightings(scan) })
            event("scan_started", ["seconds": .double(seconds)])
        }
        bridge.publishInfo()
        reply.ok(["scanning": true, "seconds": .double(seconds)])
        try? await sleep(span)
        if scanning.withLock({ $0.generation == generation }) { await stopScan() }
    }

    func stopScan() async {
        let (scan, seen) = scanning.withLock { s -> (BLEScan?, Int) in
            defer { s.scan = nil; s.until = nil; s.generation += 1 }
            return (s.scan, s.seen.count)
        }
        guard let scan else { return }
        await scan.stop()
        event("scan_stopped", ["seen": .int(Int64(seen))])
        bridge.publishInfo()
    }

    func publishSightings(_ scan: BLEScan) async {
        for await ad in scan.advertisements {
            let payload = sighting(ad)
            let now = clock.now()
            let publish = scanning.withLock { s -> Bool in
                s.seen[ad.address] = ad
                if let last = s.published[ad.address], last.payload == payload, now - last.at < .seconds(1) { return false }
                s.published[ad.address] = (now, payload)
                return true
            }
            if publish { mqtt.send(OutboundMessage(topic: topics.bridgeScan, json: payload, qos: 0, retain: false)) }
            // A configured device's signal strength (its RSSI diagnostic entity).
            if let rssi = ad.rssi, let session = bridge.registry.withLock({ r in r.values.first { $0.config.address == ad.address }?.session }) {
                session.observed(rssi: rssi)
            }
        }
    }

    /// One sighting as published on `<base>/bridge/scan`.
    func sighting(_ ad: Advertisement) -> JSONValue {
        var o = JSONObject()
        o["address"] = .string(ad.address)
        o["name"] = ad.name.map { .string($0) } ?? .null
        o["rssi"] = ad.rssi.map { .int(Int64($0)) } ?? .null
        o["service_uuids"] = .array(ad.serviceUUIDs.map { .string(ProfileGuess.shortUUID($0)) })
        o["manufacturer_data"] = .object(JSONObject(ad.manufacturerData.keys.sorted().map {
            (key: String(format: "0x%04X", $0), value: JSONValue.string(Hex.encode(ad.manufacturerData[$0]!)))
        }))
        o["service_data"] = .object(JSONObject(ad.serviceData.keys.sorted().map {
            (key: ProfileGuess.shortUUID($0), value: JSONValue.string(Hex.encode(ad.serviceData[$0]!)))
        }))
        let configured = bridge.registry.withLock { r in r.values.first { $0.config.address == ad.address }?.config.id }
        o["configured"] = .bool(configured != nil)
        if let configured { o["device"] = .string(configured) }
        o["profile_guess"] = bridge.profiles.guess(ad).map { .string($0.name) } ?? .null
        o["connected"] = .bool(ad.connected)
        o["paired"] = .bool(ad.paired)
        return .object(o)
    }

    func event(_ type: String, _ extra: JSONObject = [:]) {
        mqtt.send(OutboundMessage(topic: topics.bridgeEvent, json: BridgeEvent.json(type, extra), qos: 0, retain: false))
    }
}
