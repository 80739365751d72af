import BlueZSimulator
import DBus

extension EmulatedBlueZ {
    /// `org.gatt2mqtt.SimulatedGoPro1` at `/org/gatt2mqtt/Simulator` (next to the emulator's
    /// `org.gatt2mqtt.Simulator1`, docs/bluez.md): `SetStatus(s address, y id, ay value)` sets a
    /// status of a simulated GoPro (e.g. 70, the battery percentage) and pushes it to registered
    /// clients as the camera does (0x93, spec gopro.md §11). Unknown address:
    /// `org.gatt2mqtt.Simulator.Error.UnknownDevice`.
    static func goProControl(_ cameras: [String: SimulatedGoPro]) -> DBusInterface {
        DBusInterface("org.gatt2mqtt.SimulatedGoPro1", methods: [
            DBusMethod("SetStatus", in: [DBusArgument("address", .string), DBusArgument("id", .byte),
                                         DBusArgument("value", .array(.byte))]) { call in
                let address: String = try call.decode(0)
                guard let camera = cameras[address.uppercased()] else {
                    throw DBusError.remote(name: "org.gatt2mqtt.Simulator.Error.UnknownDevice", message: "no simulated GoPro \(address)")
                }
                let value: [UInt8] = try call.decode(2)
                guard !value.isEmpty, value.count <= 255 else {
                    throw DBusError.remote(name: "org.gatt2mqtt.Simulator.Error.InvalidArguments", message: "a status value has 1…255 bytes")
                }
                camera.setStatus(try call.decode(1), value)
                return []
            },
        ])
    }
}
