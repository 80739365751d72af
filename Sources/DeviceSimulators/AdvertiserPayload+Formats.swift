import BinaryCoding

/// The plain (unencrypted) formats of `gatt2mqtt simulate --device KIND@ADDRESS`, each written
/// from its specification. The encrypted ones (BTHome with a bindkey, Xiaomi MiBeacon) are a
/// payload each in a file of their own.
extension AdvertiserPayload {
    /// BTHome v2, unencrypted (bthome.io/format): service data 0xFCD2 = device information 0x40
    /// (version 2, not encrypted, regular interval), then the objects in id order: packet id 0x00
    /// (uint8: the counter's low byte), battery 0x01 (uint8 %), temperature 0x02 (sint16 LE,
    /// 0.01 °C), humidity 0x03 (uint16 LE, 0.01 %). E.g. 21.50 °C, 45.00 %, 92 %, packet 7:
    /// `40 00 07 01 5c 02 66 08 03 94 11`.
    public static let bthome = AdvertiserPayload(name: { _ in "BTHome Thermometer" }) { f in
        var w = ByteWriter()
        w.writeUInt8(0x40)
        w.writeUInt8(0x00)
        w.writeUInt8(UInt8(truncatingIfNeeded: f.counter))
        w.writeUInt8(0x01)
        w.writeUInt8(f.readings.battery)
        w.writeUInt8(0x02)
        w.writeInteger(f.readings.centiCelsius, endianness: .little)
        w.writeUInt8(0x03)
        w.writeInteger(f.readings.centiPercent, endianness: .little)
        return Data(serviceData: ["FCD2": w.bytes])
    }

    /// ATC1441's custom format (pvvx/ATC_MiThermometer README, "atc1441 format"): service data
    /// 0x181A, 13 bytes, big-endian: MAC (6, as written), temperature (sint16, 0.1 °C), humidity
    /// (uint8 %), battery (uint8 %), battery voltage (uint16 mV), frame counter (uint8). Named
    /// `ATC_` + the last three address bytes, as that firmware does.
    public static let atc = AdvertiserPayload(name: { "ATC_" + Hex.encode(Array($0.suffix(3))).uppercased() }) { f in
        var w = ByteWriter()
        w.writeBytes(f.address)
        w.writeInteger(f.readings.centiCelsius / 10, endianness: .big)
        w.writeUInt8(UInt8(min(f.readings.centiPercent / 100, 100)))
        w.writeUInt8(f.readings.battery)
        w.writeInteger(f.batteryMillivolts, endianness: .big)
        w.writeUInt8(UInt8(truncatingIfNeeded: f.counter))
        return Data(serviceData: ["181A": w.bytes])
    }

    /// PVVX's custom format (pvvx/ATC_MiThermometer README, "Custom format"): service data
    /// 0x181A, 15 bytes, little-endian: MAC (6, reversed), temperature (sint16, 0.01 °C),
    /// humidity (uint16, 0.01 %), battery voltage (uint16 mV), battery (uint8 %), measurement
    /// counter (uint8), flags (uint8; 0: no trigger or reed switch).
    public static let pvvx = AdvertiserPayload(name: { "ATC_" + Hex.encode(Array($0.suffix(3))).uppercased() }) { f in
        var w = ByteWriter()
        w.writeBytes(f.address.reversed())
        w.writeInteger(f.readings.centiCelsius, endianness: .little)
        w.writeInteger(f.readings.centiPercent, endianness: .little)
        w.writeInteger(f.batteryMillivolts, endianness: .little)
        w.writeUInt8(f.readings.battery)
        w.writeUInt8(UInt8(truncatingIfNeeded: f.counter))
        w.writeUInt8(0)
        return Data(serviceData: ["181A": w.bytes])
    }

    /// RuuviTag data format 5 (RAWv2, docs.ruuvi.com): manufacturer 0x0499, 24 bytes, big-endian:
    /// 0x05, temperature (sint16, 0.005 °C), humidity (uint16, 0.0025 %), pressure (uint16, Pa
    /// − 50000), acceleration x, y, z (sint16 mG: lying flat, 0 0 1000), power info (11 bits
    /// battery mV − 1600, 5 bits (TX dBm + 40) / 2: +4 dBm), movement counter (uint8: 0),
    /// measurement sequence (uint16: the counter; 0xFFFF is "not available", so it wraps before),
    /// MAC (6). The pressure follows the counter: 1013.00 hPa + (counter mod 100) Pa.
    public static let ruuvi = AdvertiserPayload(name: { "Ruuvi " + Hex.encode(Array($0.suffix(2))).uppercased() }) { f in
        var w = ByteWriter()
        w.writeUInt8(0x05)
        w.writeInteger(f.readings.centiCelsius &* 2, endianness: .big)
        w.writeInteger(f.readings.centiPercent &* 4, endianness: .big)
        w.writeInteger(UInt16(101_300 - 50_000 + Int(f.counter % 100)), endianness: .big)
        for mg: Int16 in [0, 0, 1000] { w.writeInteger(mg, endianness: .big) }
        let millivolts = UInt16(min(max(Int(f.batteryMillivolts) - 1600, 0), 2046))
        w.writeInteger(millivolts << 5 | UInt16((4 + 40) / 2), endianness: .big)
        w.writeUInt8(0)
        w.writeInteger(UInt16(f.counter % 0xFFFF), endianness: .big)
        w.writeBytes(f.address)
        return Data(manufacturerData: [0x0499: w.bytes])
    }

    /// Govee H5075 (as documented captures show; no published specification): manufacturer
    /// 0xEC88, 6 bytes: 0x00, a 24-bit big-endian number = tenths of °C × 1000 + tenths of %
    /// (bit 23 set for a temperature below zero, the rest its magnitude), battery (uint8 %),
    /// 0x00. Named `GVH5075_` + the last two address bytes.
    public static let govee = AdvertiserPayload(name: { "GVH5075_" + Hex.encode(Array($0.suffix(2))).uppercased() }) { f in
        let deci = Int(f.readings.centiCelsius) / 10, permille = min(Int(f.readings.centiPercent) / 10, 999)
        let packed = UInt32(abs(deci) * 1000 + permille) | (deci < 0 ? 0x80_0000 : 0)
        let bytes: [UInt8] = [0x00, UInt8(packed >> 16 & 0xFF), UInt8(packed >> 8 & 0xFF), UInt8(packed & 0xFF),
                              min(f.readings.battery, 100), 0x00]
        return Data(manufacturerData: [0xEC88: bytes])
    }
}
