import BinaryCoding
import BlueZSimulator

/// How a model is described to a radio front-end in the `devices` answer to `hello`
/// (docs/bluez.md "The radio front-end protocol"): everything the front-end needs to advertise
/// the device and build its GATT table, nothing about how it behaves.
enum PeripheralDescription {
    /// `{"address","kind","mtu","connectable","advertisement":{…},"services":[…]}`.
    static func json(kind: String, _ device: any SimulatedDevice) -> JSONValue {
        let services: [JSONValue] = device.services.map { service in
            .object([
                "uuid": .string(service.uuid),
                "primary": .bool(service.primary),
                "characteristics": .array(service.characteristics.map { c in
                    .object([
                        "uuid": .string(c.uuid),
                        "flags": .array(c.flags.map(JSONValue.string)),
                        "value": .string(Hex.encode(c.value)),
                    ])
                }),
            ])
        }
        return .object([
            "address": .string(device.address),
            "kind": .string(kind),
            "mtu": .int(Int64(device.mtu)),
            "connectable": .bool(device.connectable),
            "advertisement": advertisement(device.advertisement),
            "services": .array(services),
        ])
    }

    /// `{"name","rssi","uuids":[…],"manufacturer_data":{"<company id, decimal>":"hex"},"service_data":{"<uuid>":"hex"}}`.
    static func advertisement(_ ad: SimulatedAdvertisement) -> JSONValue {
        let manufacturer = JSONObject(ad.manufacturerData.keys.sorted().map { id in
            (key: String(id), value: .string(Hex.encode(ad.manufacturerData[id]!)))
        })
        let serviceData = JSONObject(ad.serviceData.keys.sorted().map { uuid in
            (key: uuid, value: .string(Hex.encode(ad.serviceData[uuid]!)))
        })
        return .object([
            "name": ad.name.map(JSONValue.string) ?? .null,
            "rssi": .int(Int64(ad.rssi)),
            "uuids": .array(ad.uuids.map(JSONValue.string)),
            "manufacturer_data": .object(manufacturer),
            "service_data": .object(serviceData),
        ])
    }
}
