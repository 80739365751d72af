import AdvertisementCodec
import BinaryCoding

extension AdvertiserPayload {
    /// The key of `simulate --device bthome-encrypted@ADDRESS` when none is given: bthome.io's
    /// example key (bthome.io/encryption). A demo key: anyone can read what it encrypts.
    public static let bthomeDemoKey: [UInt8] = [0x23, 0x1D, 0x39, 0xC1, 0xD7, 0xCC, 0x1A, 0xB1,
                                                 0xAE, 0xE2, 0x24, 0xCD, 0x09, 0x6D, 0xB9, 0x32]

    /// BTHome v2 with encryption (bthome.io/encryption), sealed by AdvertisementCodec's
    /// `BTHome.encode`: the objects of ``bthome`` (packet id: the frame counter's low byte,
    /// battery, temperature, humidity) under AES-CCM with `key` (16 bytes), the device
    /// information byte 0x41. Its 4-byte counter is `counterBase + frame counter`: it grows with
    /// each reading, and with a wall-clock base (``SimulatedPeripheral``'s) across restarts of
    /// the simulator too, so a bridge that remembers the last counter does not refuse a new run.
    public static func bthomeEncrypted(key: [UInt8], counterBase: UInt32 = 0) -> AdvertiserPayload {
        AdvertiserPayload(name: { _ in "BTHome Encrypted" }) { f in
            let r = f.readings
            let objects: [(id: UInt8, value: BTHome.Value)] = [
                (0x01, .number(Double(min(r.battery, 100)))),
                (0x02, .number(Double(r.centiCelsius) / 100)),
                (0x03, .number(Double(r.centiPercent) / 100)),
            ]
            let encryption = BTHome.Encryption(key: key, counter: counterBase &+ f.counter, address: f.addressText)
            return Data(serviceData: ["FCD2": sealed("BTHome") {
                try BTHome.encode(objects, packetID: UInt8(truncatingIfNeeded: f.counter), encryption: encryption)
            }])
        }
    }

    /// The bytes `encode` gives. It throws only for a key that is not 16 bytes or a value out of
    /// its object's range, which the simulator never makes (keys are checked where they are
    /// parsed, ``SimulatedDeviceSpec``; readings stay in range): a failure is a simulator bug.
    static func sealed(_ format: String, _ encode: () throws -> [UInt8]) -> [UInt8] {
        do { return try encode() } catch { preconditionFailure("simulated \(format) advertisement: \(error)") }
    }
}

extension SimulatedAdvertiser.Frame {
    /// The address as text, `A4:C1:38:00:00:01` (what the encrypted formats put in their nonce).
    var addressText: String { address.map { Hex.encode([$0]).uppercased() }.joined(separator: ":") }
}
