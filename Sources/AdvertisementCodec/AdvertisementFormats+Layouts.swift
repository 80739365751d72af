import BinaryCoding
import GattLayout

/// The fixed-layout formats, written in the layout language (docs/advertisement-layouts.md):
/// `atc` (ATC1441's and PVVX's custom formats, told apart by length), `ruuvi` (RuuviTag data
/// format 5) and `govee` (H5072/H5075 and H5074, told apart by length). Each is parsed from its
/// JSON text at first use.
extension AdvertisementFormats {
    public static let layouts: [any AdvertisementFormat] = LayoutFormat.builtinDefinitions.map { name, text in
        do {
            return try LayoutFormat(json: try JSONValue(parsing: text), name: name)
        } catch {
            // The definitions are constants of this file, parsed by the tests (LayoutFormatTests).
            preconditionFailure("built-in advertisement layout '\(name)': \(error)")
        }
    }
}

extension LayoutFormat {
    /// The built-in definitions, by name, as JSON text (what `layout show --advertisement` prints).
    public static let builtinDefinitions: [(name: String, json: String)] = [
        ("atc", atc), ("ruuvi", ruuvi), ("govee", govee),
    ]

    /// Service data 0x181A. ATC1441's firmware (13 bytes, big-endian): MAC, temperature 0.1 °C,
    /// humidity %, battery %, battery mV, frame counter. PVVX's custom format (15 bytes,
    /// little-endian): MAC reversed, temperature 0.01 °C, humidity 0.01 %, battery mV, battery %,
    /// counter, flags (the GPIO and trigger bits: skipped). The MAC is the device's address: skipped.
    static let atc = #"""
    {"description": "ATC1441 and PVVX custom firmware for Xiaomi LYWSD03MMC and kin (service data 0x181A)",
     "variants": [
      {"description": "ATC1441 format: 13 bytes, big-endian",
       "match": {"service_data": "181A", "length": 13},
       "packet_id": "frame_counter",
       "layout": {"fields": [
         {"type": "pad", "length": 6, "description": "MAC address"},
         {"name": "temperature", "type": "i16", "endian": "big", "scale": "1/10", "unit": "°C"},
         {"name": "humidity", "type": "u8", "unit": "%"},
         {"name": "battery", "type": "u8", "unit": "%"},
         {"name": "voltage", "type": "u16", "endian": "big", "scale": "1/1000", "unit": "V"},
         {"name": "frame_counter", "type": "u8"}]}},
      {"description": "PVVX custom format: 15 bytes, little-endian",
       "match": {"service_data": "181A", "length": 15},
       "packet_id": "counter",
       "layout": {"fields": [
         {"type": "pad", "length": 6, "description": "MAC address, reversed"},
         {"name": "temperature", "type": "i16", "scale": "1/100", "unit": "°C"},
         {"name": "humidity", "type": "u16", "scale": "1/100", "unit": "%"},
         {"name": "voltage", "type": "u16", "scale": "1/1000", "unit": "V"},
         {"name": "battery", "type": "u8", "unit": "%"},
         {"name": "counter", "type": "u8"},
         {"type": "pad", "length": 1, "description": "flags: GPIO and trigger bits"}]}}]}
    """#

    /// Manufacturer data of Ruuvi Innovations (0x0499), data format 5 (RAWv2), big-endian. Each
    /// field's "not available" value of the specification omits it. Acceleration in m/s² (the
    /// tag sends mG: × 0.00980665), pressure in hPa (the tag sends Pa − 50000), voltage in V.
    static let ruuvi = #"""
    {"description": "RuuviTag data format 5 (manufacturer data 0x0499)",
     "match": {"manufacturer_id": 1177, "prefix": "05", "length": 24},
     "packet_id": "measurement_sequence",
     "layout": {"fields": [
       {"type": "pad", "value": "05", "description": "data format 5"},
       {"name": "temperature", "type": "i16", "endian": "big", "scale": 0.005, "invalid": 32768, "unit": "°C"},
       {"name": "humidity", "type": "u16", "endian": "big", "scale": 0.0025, "invalid": 65535, "unit": "%"},
       {"name": "pressure", "type": "u16", "endian": "big", "scale": "1/100", "offset": 500, "invalid": 65535, "unit": "hPa"},
       {"name": "acceleration_x", "type": "i16", "endian": "big", "scale": 0.00980665, "invalid": -32768, "unit": "m/s²"},
       {"name": "acceleration_y", "type": "i16", "endian": "big", "scale": 0.00980665, "invalid": -32768, "unit": "m/s²"},
       {"name": "acceleration_z", "type": "i16", "endian": "big", "scale": 0.00980665, "invalid": -32768, "unit": "m/s²"},
       {"type": "flags", "size": 2, "endian": "big", "description": "power info", "bits": [
         {"name": "voltage", "bit": 5, "width": 11, "scale": "1/1000", "offset": 1.6, "invalid": 2047, "unit": "V"},
         {"name": "tx_power", "bit": 0, "width": 5, "scale": 2, "offset": -40, "invalid": 31, "unit": "dBm"}]},
       {"name": "movement_counter", "type": "u8", "invalid": 255},
       {"name": "measurement_sequence", "type": "u16", "endian": "big", "invalid": 65535},
       {"type": "pad", "length": 6, "description": "MAC address"}]}}
    """#

    /// Manufacturer data 0xEC88 of Govee thermo-hygrometers. H5072/H5075 (6 bytes): a 24-bit
    /// big-endian number, sign and magnitude, whose magnitude is temperature × 10000 + humidity
    /// × 10 (so temperature = magnitude / 1000 / 10, humidity = magnitude mod 1000 / 10), then
    /// the battery % with an error bit on top. H5074 (7 bytes): temperature i16 and humidity u16
    /// little-endian in 0.01, battery %.
    static let govee = #"""
    {"description": "Govee H5072/H5075 and H5074 thermo-hygrometers (manufacturer data 0xEC88)",
     "variants": [
      {"description": "H5072/H5075: 6 bytes",
       "match": {"manufacturer_id": "0xEC88", "length": 6},
       "layout": {"fields": [
         {"type": "pad", "length": 1},
         {"type": "i24", "endian": "big", "sign": "magnitude", "parts": [
           {"name": "temperature", "divide": 1000, "signed": true, "scale": "1/10", "unit": "°C"},
           {"name": "humidity", "modulo": 1000, "scale": "1/10", "unit": "%"}]},
         {"type": "flags", "bits": [
           {"name": "battery", "bit": 0, "width": 7, "unit": "%"},
           {"name": "problem", "bit": 7}]},
         {"type": "pad", "length": 1}]}},
      {"description": "H5074: 7 bytes",
       "match": {"manufacturer_id": "0xEC88", "length": 7},
       "layout": {"fields": [
         {"type": "pad", "length": 1},
         {"name": "temperature", "type": "i16", "scale": "1/100", "unit": "°C"},
         {"name": "humidity", "type": "u16", "scale": "1/100", "unit": "%"},
         {"name": "battery", "type": "u8", "unit": "%"},
         {"type": "pad", "length": 1}]}}]}
    """#
}
