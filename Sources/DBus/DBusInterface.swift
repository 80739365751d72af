/// A named, typed argument of a method or signal, for introspection and argument checks
/// (D-Bus Specification, "Introspection Data Format").
public struct DBusArgument: Sendable, Hashable {
    public var name: String?
    public var type: DBusType
    public init(_ name: String?, _ type: DBusType) {
        self.name = name
        self.type = type
    }
}

extension DBusType {
    /// `a{sv}`, the usual options/properties dictionary.
    public static let properties = DBusType.dictionary(key: .string, value: .variant)
}

/// What a method handler receives: the call message and its arguments.
public struct DBusMethodCall: Sendable {
    public var message: DBusMessage
    public var arguments: [DBusValue] { message.body }
    /// The caller's unique name.
    public var sender: String? { message.sender }
    public var path: DBusObjectPath { message.path ?? .root }

    /// Decodes argument `index` as `T`.
    public func decode<T: DBusRepresentable>(_ index: Int, as: T.Type = T.self) throws(DBusError) -> T {
        try message.body.decode(index, as: T.self)
    }
}

/// A method of an exported interface. The handler may be async; it returns the reply's values
/// or throws ``DBusError/remote(name:message:)`` to answer with that D-Bus error (any other
/// error becomes `org.freedesktop.DBus.Error.Failed` with its description).
public struct DBusMethod: Sendable {
    public var name: String
    public var inArguments: [DBusArgument]
    public var outArguments: [DBusArgument]
    public var handler: @Sendable (DBusMethodCall) async throws -> [DBusValue]

    /// Calls whose arguments do not match `in` are answered with `InvalidArgs` before the
    /// handler runs; return values that do not match `out` are answered with `Failed`.
    public init(_ name: String, in inArguments: [DBusArgument] = [], out outArguments: [DBusArgument] = [],
                handler: @escaping @Sendable (DBusMethodCall) async throws -> [DBusValue])
    {
        self.name = name
        self.inArguments = inArguments
        self.outArguments = outArguments
        self.handler = handler
    }
}

/// A property of an exported interface (D-Bus Specification, "org.freedesktop.DBus.Properties").
/// Its value is stored by the connection; change it with
/// ``DBusConnection/setProperties(_:interface:_:alwaysEmit:)``.
public struct DBusProperty: Sendable {
    public enum Access: String, Sendable { case read, write, readwrite }
    /// `org.freedesktop.DBus.Property.EmitsChangedSignal`.
    public enum EmitsChanged: String, Sendable { case `true`, invalidates, `false` }

    public var name: String
    public var type: DBusType
    public var access: Access
    public var value: DBusValue
    public var emitsChanged: EmitsChanged
    /// Called for a remote `Set` (after the type check); throw ``DBusError/remote(name:message:)``
    /// to refuse. Return the value to store (usually the one given).
    public var onSet: (@Sendable (DBusValue) async throws -> DBusValue)?

    public init(_ name: String, _ value: DBusValue, access: Access = .read, emitsChanged: EmitsChanged = .true,
                onSet: (@Sendable (DBusValue) async throws -> DBusValue)? = nil)
    {
        self.name = name
        self.type = value.type
        self.value = value
        self.access = access
        self.emitsChanged = emitsChanged
        self.onSet = onSet
    }
}

/// A signal an exported interface emits (for introspection).
public struct DBusSignalDescription: Sendable {
    public var name: String
    public var arguments: [DBusArgument]
    public init(_ name: String, _ arguments: [DBusArgument] = []) {
        self.name = name
        self.arguments = arguments
    }
}

/// An interface to export on an object path: methods, properties and signals.
///
/// ```swift
/// let adapter = DBusInterface("org.bluez.Adapter1",
///     methods: [DBusMethod("StartDiscovery") { _ in [] }],
///     properties: [DBusProperty("Powered", .boolean(true), access: .readwrite)])
/// try connection.export("/org/bluez/hci0", interfaces: [adapter])
/// ```
public struct DBusInterface: Sendable {
    public var name: String
    public var methods: [DBusMethod]
    public var properties: [DBusProperty]
    public var signals: [DBusSignalDescription]

    public init(_ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [],
                signals: [DBusSignalDescription] = [])
    {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }

    func validate() throws(DBusError) {
        try Names.interface(name)
        for m in methods { try Names.member(m.name) }
        for s in signals { try Names.member(s.name) }
        for p in properties {
            try Names.member(p.name)
            try p.value.validate()
        }
    }
}
