import CDBus

/// A received (or about to be sent) D-Bus message, copied out of libdbus into Swift values
/// (D-Bus Specification, "Message Format": header fields and body).
public struct DBusMessage: Sendable, CustomStringConvertible {
    /// The four message types (D-Bus Specification, "Message Types").
    public enum Kind: Sendable, Equatable {
        case methodCall, methodReturn, error, signal
    }

    public var kind: Kind
    public var serial: UInt32 = 0
    public var replySerial: UInt32 = 0
    public var sender: String?
    public var destination: String?
    public var path: DBusObjectPath?
    public var interface: String?
    public var member: String?
    /// Error name (only for ``Kind/error``).
    public var errorName: String?
    /// The body's signature, e.g. `oa{sa{sv}}`.
    public var signature: String = ""
    /// Whether the caller asked for no reply (method calls only).
    public var noReplyExpected = false
    public var body: [DBusValue] = []

    public init(kind: Kind) { self.kind = kind }

    /// Decodes body argument `index` as `T` (see ``DBusValue/decode(as:)``).
    public func decode<T: DBusRepresentable>(_ index: Int = 0, as: T.Type = T.self) throws(DBusError) -> T {
        try body.decode(index, as: T.self)
    }

    public var description: String {
        var parts = ["\(kind)"]
        if let sender { parts.append("sender=\(sender)") }
        if let path { parts.append("path=\(path)") }
        if let interface { parts.append("interface=\(interface)") }
        if let member { parts.append("member=\(member)") }
        if let errorName { parts.append("error=\(errorName)") }
        parts.append("body=\(body)")
        return parts.joined(separator: " ")
    }

    /// Copies a libdbus message (borrowed: not retained, not released).
    init(copying msg: OpaquePointer) throws(DBusError) {
        switch dbus_message_get_type(msg) {
        case Int32(DBUS_MESSAGE_TYPE_METHOD_CALL): kind = .methodCall
        case Int32(DBUS_MESSAGE_TYPE_METHOD_RETURN): kind = .methodReturn
        case Int32(DBUS_MESSAGE_TYPE_ERROR): kind = .error
        default: kind = .signal
        }
        serial = dbus_message_get_serial(msg)
        replySerial = dbus_message_get_reply_serial(msg)
        sender = dbus_message_get_sender(msg).map { String(cString: $0) }
        destination = dbus_message_get_destination(msg).map { String(cString: $0) }
        path = dbus_message_get_path(msg).map { DBusObjectPath(received: String(cString: $0)) }
        interface = dbus_message_get_interface(msg).map { String(cString: $0) }
        member = dbus_message_get_member(msg).map { String(cString: $0) }
        errorName = dbus_message_get_error_name(msg).map { String(cString: $0) }
        signature = dbus_message_get_signature(msg).map { String(cString: $0) } ?? ""
        noReplyExpected = dbus_message_get_no_reply(msg) != 0
        body = try Marshal.readBody(of: msg)
    }

    /// The error this message stands for, if it is an error reply: name kept as sent,
    /// message from the first string argument.
    public var asError: DBusError? {
        guard kind == .error else { return nil }
        let text: String
        if case let .string(s)? = body.first { text = s } else { text = "" }
        return .remote(name: errorName ?? DBusErrorName.failed, message: text)
    }
}

/// Name checks (D-Bus Specification, "Valid Names"), done before libdbus sees a name because
/// libdbus aborts on invalid ones.
enum Names {
    static func check(_ s: String, _ kind: String,
                      _ validate: (UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusError>?) -> dbus_bool_t)
        throws(DBusError)
    {
        guard !s.containsNUL, s.withCString({ validate($0, nil) }) != 0 else {
            throw .invalidArgument("\(kind) \"\(s)\" is not valid")
        }
    }
    static func interface(_ s: String) throws(DBusError) { try check(s, "interface name", dbus_validate_interface) }
    static func member(_ s: String) throws(DBusError) { try check(s, "member name", dbus_validate_member) }
    static func busName(_ s: String) throws(DBusError) { try check(s, "bus name", dbus_validate_bus_name) }
    static func errorName(_ s: String) throws(DBusError) { try check(s, "error name", dbus_validate_error_name) }
    static func path(_ p: DBusObjectPath) throws(DBusError) {
        guard p.isKnownValid else { throw .invalidArgument("object path \"\(p.rawValue)\" is not valid") }
    }
}

/// Builds libdbus messages; every returned pointer is owned (+1) by the caller.
enum MessageBuilder {
    static func methodCall(destination: String?, path: DBusObjectPath, interface: String?, member: String,
                           arguments: [DBusValue]) throws(DBusError) -> OpaquePointer
    {
        if let destination { try Names.busName(destination) }
        try Names.path(path)
        if let interface { try Names.interface(interface) }
        try Names.member(member)
        for a in arguments { try a.validate() }
        let msg = withOptionalCString(destination) { d in
            path.rawValue.withCString { p in
                withOptionalCString(interface) { i in
                    member.withCString { m in dbus_message_new_method_call(d, p, i, m) }
                }
            }
        }
        guard let msg else { throw .outOfMemory }
        return try fill(msg, arguments)
    }

    static func signal(path: DBusObjectPath, interface: String, member: String, destination: String? = nil,
                       arguments: [DBusValue]) throws(DBusError) -> OpaquePointer
    {
        try Names.path(path)
        try Names.interface(interface)
        try Names.member(member)
        if let destination { try Names.busName(destination) }
        for a in arguments { try a.validate() }
        let msg = path.rawValue.withCString { p in
            interface.withCString { i in member.withCString { m in dbus_message_new_signal(p, i, m) } }
        }
        guard let msg else { throw .outOfMemory }
        if let destination {
            guard destination.withCString({ dbus_message_set_destination(msg, $0) }) != 0 else {
                dbus_message_unref(msg)
                throw .outOfMemory
            }
        }
        return try fill(msg, arguments)
    }

    /// A method return answering `call` (built from its sender and serial).
    static func methodReturn(to call: DBusMessage, arguments: [DBusValue]) throws(DBusError) -> OpaquePointer {
        for a in arguments { try a.validate() }
        guard let msg = dbus_message_new(Int32(DBUS_MESSAGE_TYPE_METHOD_RETURN)) else { throw .outOfMemory }
        try address(msg, to: call)
        return try fill(msg, arguments)
    }

    /// An error reply answering `call`.
    static func error(to call: DBusMessage, name: String, message: String) throws(DBusError) -> OpaquePointer {
        let safeName = (try? Names.errorName(name)) != nil ? name : DBusErrorName.failed
        guard let msg = dbus_message_new(Int32(DBUS_MESSAGE_TYPE_ERROR)) else { throw .outOfMemory }
        guard safeName.withCString({ dbus_message_set_error_name(msg, $0) }) != 0 else {
            dbus_message_unref(msg)
            throw .outOfMemory
        }
        try address(msg, to: call)
        let text = String(message.unicodeScalars.filter { $0 != "\0" })
        return try fill(msg, [.string(text)])
    }

    private static func address(_ msg: OpaquePointer, to call: DBusMessage) throws(DBusError) {
        dbus_message_set_no_reply(msg, 1)
        var ok = dbus_message_set_reply_serial(msg, call.serial) != 0
        if ok, let sender = call.sender {
            ok = sender.withCString { dbus_message_set_destination(msg, $0) } != 0
        }
        guard ok else {
            dbus_message_unref(msg)
            throw .outOfMemory
        }
    }

    private static func fill(_ msg: OpaquePointer, _ arguments: [DBusValue]) throws(DBusError) -> OpaquePointer {
        do {
            try Marshal.append(arguments, to: msg)
        } catch {
            dbus_message_unref(msg)
            throw error
        }
        return msg
    }
}

func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}
