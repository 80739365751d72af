import BinaryCoding

/// The built-in layouts, addressable as `builtin:NAME` (docs/layouts.md, "Built-in layouts").
/// Each is an ordinary layout definition (data), written from the Bluetooth GATT Specification
/// Supplement (GSS) entry of its characteristic.
public enum BuiltinLayout: String, CaseIterable, Sendable {
    /// GSS "Battery Level" (0x2A19): one uint8, percent, 0…100 (101…255 are prohibited).
    case batteryLevel = "battery_level"
    /// GSS "Heart Rate Measurement" (0x2A37): flags (bit 0 value format uint8/uint16, bit 1 sensor
    /// contact detected, bit 2 sensor contact supported, bit 3 energy expended present, bit 4
    /// RR-intervals present), heart rate in bpm, energy expended (uint16, kJ), RR-intervals
    /// (uint16 each, 1/1024 s, decoded in seconds).
    case heartRateMeasurement = "heart_rate_measurement"
    /// GSS "Temperature Measurement" (0x2A1C): flags (bit 0 Fahrenheit, bit 1 time stamp present,
    /// bit 2 temperature type present), the value as medfloat32 in °C or °F, the time stamp as a
    /// GSS Date Time (year uint16, month, day, hours, minutes, seconds), and the temperature type
    /// (GSS "Temperature Type" 0x2A1D: 1 armpit … 9 tympanum).
    case temperatureMeasurement = "temperature_measurement"
    /// GSS "Temperature" (0x2A6E, Environmental Sensing): one sint16 in 0.01 °C, −273.15…327.67
    /// (0x8000, "value is not known", is below the minimum: malformed).
    case temperature
    /// GSS "Humidity" (0x2A6F, Environmental Sensing): one uint16 in 0.01 %, 0…100 (0xFFFF,
    /// "value is not known", and everything above 100 % are malformed).
    case humidity

    /// The characteristic's 16-bit UUID (Bluetooth Assigned Numbers).
    public var uuid16: UInt16 {
        switch self {
        case .batteryLevel: return 0x2A19
        case .heartRateMeasurement: return 0x2A37
        case .temperatureMeasurement: return 0x2A1C
        case .temperature: return 0x2A6E
        case .humidity: return 0x2A6F
        }
    }

    /// The built-in whose characteristic has this 16-bit UUID.
    public init?(uuid16: UInt16) {
        guard let b = Self.allCases.first(where: { $0.uuid16 == uuid16 }) else { return nil }
        self = b
    }

    /// The parsed layout.
    public func layout() throws(GattLayoutError) -> GattLayout { try GattLayout(json: definition) }

    /// The layout definition, exactly as a user would write it in JSON or YAML.
    public var definition: JSONValue {
        switch self {
        case .batteryLevel:
            return [
                "name": "battery_level", "uuid": "2A19",
                "fields": [["name": "battery_level", "type": "u8", "max": 100, "unit": "%"]],
            ]
        case .heartRateMeasurement:
            return [
                "name": "heart_rate_measurement", "uuid": "2A37",
                "fields": [
                    [
                        "type": "flags",
                        "bits": [
                            ["name": "heart_rate_u16", "bit": 0],
                            ["name": "sensor_contact_detected", "bit": 1],
                            ["name": "sensor_contact_supported", "bit": 2],
                            ["name": "energy_expended_present", "bit": 3],
                            ["name": "rr_intervals_present", "bit": 4],
                        ],
                    ],
                    ["name": "heart_rate", "type": "u8", "present_unless": "heart_rate_u16", "unit": "bpm"],
                    ["name": "heart_rate", "type": "u16", "present_if": "heart_rate_u16", "unit": "bpm"],
                    ["name": "energy_expended", "type": "u16", "present_if": "energy_expended_present", "unit": "kJ"],
                    [
                        "name": "rr_intervals", "type": "u16", "scale": "1/1024", "repeat": "rest",
                        "present_if": "rr_intervals_present", "unit": "s",
                    ],
                ],
            ]
        case .temperatureMeasurement:
            return [
                "name": "temperature_measurement", "uuid": "2A1C",
                "fields": [
                    [
                        "type": "flags",
                        "bits": [
                            ["name": "fahrenheit", "bit": 0],
                            ["name": "time_stamp_present", "bit": 1],
                            ["name": "temperature_type_present", "bit": 2],
                        ],
                    ],
                    ["name": "temperature_celsius", "type": "medfloat32", "present_unless": "fahrenheit", "unit": "°C"],
                    ["name": "temperature_fahrenheit", "type": "medfloat32", "present_if": "fahrenheit", "unit": "°F"],
                    ["name": "time_stamp", "type": "date_time", "present_if": "time_stamp_present"],
                    [
                        "name": "temperature_type", "type": "u8", "present_if": "temperature_type_present",
                        "enum": [
                            "1": "armpit", "2": "body", "3": "ear", "4": "finger", "5": "gastrointestinal_tract",
                            "6": "mouth", "7": "rectum", "8": "toe", "9": "tympanum",
                        ],
                    ],
                ],
            ]
        case .temperature:
            return [
                "name": "temperature", "uuid": "2A6E",
                "fields": [["name": "temperature", "type": "i16", "scale": 0.01, "min": -273.15, "unit": "°C"]],
            ]
        case .humidity:
            return [
                "name": "humidity", "uuid": "2A6F",
                "fields": [["name": "humidity", "type": "u16", "scale": 0.01, "min": 0, "max": 100, "unit": "%"]],
            ]
        }
    }
}

extension GattLayout {
    /// The built-in layout `name` (without the `builtin:` prefix), or
    /// ``GattLayoutError/unknownBuiltin(name:known:)``.
    public static func builtin(named name: String) throws(GattLayoutError) -> GattLayout {
        guard let b = BuiltinLayout(rawValue: name) else {
            throw .unknownBuiltin(name: name, known: BuiltinLayout.allCases.map(\.rawValue))
        }
        return try b.layout()
    }
}
