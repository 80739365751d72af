/// One camera status (spec gopro.md §11): the element ids of status queries and pushes.
public struct GoProStatus: Sendable, Hashable {
    /// How a status value is interpreted (§11 "Doc type").
    public enum ValueType: Sendable, Hashable {
        /// One byte, non-zero = true.
        case bool
        /// Unsigned big-endian integer of whatever length arrives (§4.2).
        case integer
        /// An integer with named values (`options`).
        case enumeration
        /// UTF-8 text.
        case string
    }

    /// The element id (§11 "ID").
    public let id: UInt8
    /// The snake_case name used in JSON (e.g. `internal_battery_percentage`).
    public let name: String
    /// The name as the spec writes it (e.g. `Internal Battery Percentage`).
    public let title: String
    public let type: ValueType
    /// Named values of an enumeration (value, name), in spec order.
    public let options: [(value: Int, name: String)]

    init(id: UInt8, name: String, title: String, type: ValueType, options: [(Int, String)]) {
        self.id = id
        self.name = name
        self.title = title
        self.type = type
        self.options = options.map { (value: $0.0, name: $0.1) }
    }

    public static func == (a: GoProStatus, b: GoProStatus) -> Bool { a.id == b.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    private static let byID: [GoProStatus?] = {
        var table = [GoProStatus?](repeating: nil, count: 256)
        for s in all { table[Int(s.id)] = s }
        return table
    }()
    private static let byName: [String: GoProStatus] = Dictionary(all.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })

    /// The documented status with this id, or `nil` (undocumented ids are kept by decoders, §4.2).
    public static func status(id: UInt8) -> GoProStatus? { byID[Int(id)] }
    /// The status with this snake_case name.
    public static func status(named name: String) -> GoProStatus? { byName[name] }
}

/// One camera setting (spec gopro.md §8 and appendix): id, name and the named option values.
public struct GoProSetting: Sendable, Hashable {
    /// The setting id (written to GP-0074, element id of setting queries).
    public let id: UInt8
    /// The snake_case name used in JSON (e.g. `video_resolution`).
    public let name: String
    /// The name as the spec writes it (e.g. `Video Resolution`).
    public let title: String
    /// Option values (value, name) in spec order (e.g. `(1, "4K")`).
    public let options: [(value: Int, name: String)]

    init(id: UInt8, name: String, title: String, options: [(Int, String)]) {
        self.id = id
        self.name = name
        self.title = title
        self.options = options.map { (value: $0.0, name: $0.1) }
    }

    public static func == (a: GoProSetting, b: GoProSetting) -> Bool { a.id == b.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }

    /// The name of option `value`, if the spec lists it.
    public func optionName(_ value: Int) -> String? {
        options.first { $0.value == value }?.name
    }

    /// The value of the option called `name` (exact match first, then case-insensitive).
    public func optionValue(named name: String) -> Int? {
        if let o = options.first(where: { $0.name == name }) { return o.value }
        let lower = name.lowercased()
        return options.first { $0.name.lowercased() == lower }?.value
    }

    private static let byID: [GoProSetting?] = {
        var table = [GoProSetting?](repeating: nil, count: 256)
        for s in all { table[Int(s.id)] = s }
        return table
    }()
    private static let byName: [String: GoProSetting] = Dictionary(all.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })

    /// The setting with this id, or `nil` for an id the spec does not list.
    public static func setting(id: UInt8) -> GoProSetting? { byID[Int(id)] }
    /// The setting with this snake_case name.
    public static func setting(named name: String) -> GoProSetting? { byName[name] }
}

extension GoProStatus {
    /// The name of enumeration value `value`, if the spec lists it.
    public func optionName(_ value: Int) -> String? {
        options.first { $0.value == value }?.name
    }
}
