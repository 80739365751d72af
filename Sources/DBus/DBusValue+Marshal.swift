import CDBus

/// D-Bus type codes as libdbus' `int` type arguments (D-Bus Specification, "Type System").
enum TypeCode {
    static let invalid: Int32 = 0
    static let byte = Int32(UInt8(ascii: "y"))
    static let boolean = Int32(UInt8(ascii: "b"))
    static let int16 = Int32(UInt8(ascii: "n"))
    static let uint16 = Int32(UInt8(ascii: "q"))
    static let int32 = Int32(UInt8(ascii: "i"))
    static let uint32 = Int32(UInt8(ascii: "u"))
    static let int64 = Int32(UInt8(ascii: "x"))
    static let uint64 = Int32(UInt8(ascii: "t"))
    static let double = Int32(UInt8(ascii: "d"))
    static let string = Int32(UInt8(ascii: "s"))
    static let objectPath = Int32(UInt8(ascii: "o"))
    static let signature = Int32(UInt8(ascii: "g"))
    static let unixFD = Int32(UInt8(ascii: "h"))
    static let array = Int32(UInt8(ascii: "a"))
    static let variant = Int32(UInt8(ascii: "v"))
    static let `struct` = Int32(UInt8(ascii: "r"))
    static let dictEntry = Int32(UInt8(ascii: "e"))
}

/// Writing and reading message bodies with libdbus' iterators (D-Bus Specification,
/// "Marshaling (Wire Format)"). Values are validated first: libdbus aborts the process on
/// ill-typed appends, so nothing unchecked reaches it.
enum Marshal {
    /// Appends `values` as the body of `message` (a fresh message with no body yet).
    static func append(_ values: [DBusValue], to message: OpaquePointer) throws(DBusError) {
        for v in values { try v.validate() }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        for v in values { try append(v, to: &iter) }
    }

    private static func check(_ ok: dbus_bool_t) throws(DBusError) {
        guard ok != 0 else { throw .outOfMemory }
    }

    private static func appendBasic<T>(_ value: T, _ type: Int32, to iter: inout DBusMessageIter) throws(DBusError) {
        var v = value
        let ok = withUnsafeMutablePointer(to: &v) { dbus_message_iter_append_basic(&iter, type, $0) }
        try check(ok)
    }

    private static func appendString(_ s: String, _ type: Int32, to iter: inout DBusMessageIter) throws(DBusError) {
        let ok = s.withCString { cstr -> dbus_bool_t in
            var p: UnsafePointer<CChar>? = cstr
            return dbus_message_iter_append_basic(&iter, type, &p)
        }
        try check(ok)
    }

    private static func withContainer(
        _ iter: inout DBusMessageIter, _ type: Int32, _ signature: String?,
        _ body: (inout DBusMessageIter) throws(DBusError) -> Void
    ) throws(DBusError) {
        var sub = DBusMessageIter()
        let opened: dbus_bool_t
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) }
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub)
        }
        try check(opened)
        do {
            try body(&sub)
        } catch {
            dbus_message_iter_abandon_container(&iter, &sub)
            throw error
        }
        try check(dbus_message_iter_close_container(&iter, &sub))
    }

    static func append(_ value: DBusValue, to iter: inout DBusMessageIter) throws(DBusError) {
        switch value {
        case let .byte(v): try appendBasic(v, TypeCode.byte, to: &iter)
        case let .boolean(v): try appendBasic(dbus_bool_t(v ? 1 : 0), TypeCode.boolean, to: &iter)
        case let .int16(v): try appendBasic(v, TypeCode.int16, to: &iter)
        case let .uint16(v): try appendBasic(v, TypeCode.uint16, to: &iter)
        case let .int32(v): try appendBasic(v, TypeCode.int32, to: &iter)
        case let .uint32(v): try appendBasic(v, TypeCode.uint32, to: &iter)
        case let .int64(v): try appendBasic(v, TypeCode.int64, to: &iter)
        case let .uint64(v): try appendBasic(v, TypeCode.uint64, to: &iter)
        case let .double(v): try appendBasic(v, TypeCode.double, to: &iter)
        case let .string(s): try appendString(s, TypeCode.string, to: &iter)
        case let .objectPath(p): try appendString(p.rawValue, TypeCode.objectPath, to: &iter)
        case let .signature(s): try appendString(s, TypeCode.signature, to: &iter)
        case let .unixFD(fd): try appendBasic(Int32(fd.fileDescriptor), TypeCode.unixFD, to: &iter)
        case let .variant(inner):
            try withContainer(&iter, TypeCode.variant, inner.signature) { (sub) throws(DBusError) in
                try append(inner, to: &sub)
            }
        case let .array(element, items):
            try withContainer(&iter, TypeCode.array, element.signature) { (sub) throws(DBusError) in
                if element == .byte {
                    var bytes = [UInt8]()
                    bytes.reserveCapacity(items.count)
                    for case let .byte(b) in items { bytes.append(b) }
                    let ok = bytes.withUnsafeBufferPointer { buf -> dbus_bool_t in
                        var base: UnsafePointer<UInt8>? = buf.baseAddress ?? UnsafePointer(bitPattern: 1)
                        return dbus_message_iter_append_fixed_array(&sub, TypeCode.byte, &base, Int32(buf.count))
                    }
                    try check(ok)
                } else {
                    for item in items { try append(item, to: &sub) }
                }
            }
        case let .dictionary(k, v, entries):
            try withContainer(&iter, TypeCode.array, "{" + k.signature + v.signature + "}") { (sub) throws(DBusError) in
                for e in entries {
                    try withContainer(&sub, TypeCode.dictEntry, nil) { (entry) throws(DBusError) in
                        try append(e.key, to: &entry)
                        try append(e.value, to: &entry)
                    }
                }
            }
        case let .struct(fields):
            try withContainer(&iter, TypeCode.struct, nil) { (sub) throws(DBusError) in
                for f in fields { try append(f, to: &sub) }
            }
        }
    }

    /// Reads the whole body of `message` (borrowed; not retained).
    static func readBody(of message: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        return try readAll(&iter)
    }

    private static func readAll(_ iter: inout DBusMessageIter) throws(DBusError) -> [DBusValue] {
        var out: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != TypeCode.invalid {
            out.append(try read(&iter))
            dbus_message_iter_next(&iter)
        }
        return out
    }

    private static func basic<T>(_ iter: inout DBusMessageIter, _ initial: T) -> T {
        var v = initial
        withUnsafeMutablePointer(to: &v) { dbus_message_iter_get_basic(&iter, $0) }
        return v
    }

    private static func string(_ iter: inout DBusMessageIter) -> String {
        var p: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &p)
        guard let p else { return "" }
        return String(cString: p)
    }

    private static func currentType(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusType {
        guard let raw = dbus_message_iter_get_signature(&iter) else { throw .outOfMemory }
        defer { dbus_free(raw) }
        return try DBusType(signature: String(cString: raw))
    }

    static func read(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let code = dbus_message_iter_get_arg_type(&iter)
        switch code {
        case TypeCode.byte: return .byte(basic(&iter, UInt8(0)))
        case TypeCode.boolean: return .boolean(basic(&iter, dbus_bool_t(0)) != 0)
        case TypeCode.int16: return .int16(basic(&iter, Int16(0)))
        case TypeCode.uint16: return .uint16(basic(&iter, UInt16(0)))
        case TypeCode.int32: return .int32(basic(&iter, Int32(0)))
        case TypeCode.uint32: return .uint32(basic(&iter, UInt32(0)))
        case TypeCode.int64: return .int64(basic(&iter, Int64(0)))
        case TypeCode.uint64: return .uint64(basic(&iter, UInt64(0)))
        case TypeCode.double: return .double(basic(&iter, Double(0)))
        case TypeCode.string: return .string(string(&iter))
        case TypeCode.objectPath: return .objectPath(DBusObjectPath(received: string(&iter)))
        case TypeCode.signature: return .signature(string(&iter))
        case TypeCode.unixFD:
            // libdbus hands out a new descriptor that the caller owns.
            let fd = basic(&iter, Int32(-1))
            guard fd >= 0 else { throw .invalidArgument("could not receive a unix fd") }
            return .unixFD(DBusUnixFD(taking: fd))
        case TypeCode.variant:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try read(&sub))
        case TypeCode.struct:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .struct(try readAll(&sub))
        case TypeCode.array:
            let type = try currentType(&iter)
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            switch type {
            case .array(.byte):
                var base: UnsafePointer<UInt8>? = nil
                var count: Int32 = 0
                withUnsafeMutablePointer(to: &base) { dbus_message_iter_get_fixed_array(&sub, $0, &count) }
                let bytes = base.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? []
                return .array(element: .byte, bytes.map { .byte($0) })
            case let .array(element):
                return .array(element: element, try readAll(&sub))
            case let .dictionary(k, v):
                var entries: [DBusDictEntry] = []
                while dbus_message_iter_get_arg_type(&sub) == TypeCode.dictEntry {
                    var entry = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &entry)
                    let key = try read(&entry)
                    dbus_message_iter_next(&entry)
                    let value = try read(&entry)
                    entries.append(DBusDictEntry(key, value))
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(key: k, value: v, entries)
            default:
                throw .invalidArgument("array with signature \(type.signature)")
            }
        default:
            throw .invalidArgument("unknown type code \(code) in a received message")
        }
    }
}
