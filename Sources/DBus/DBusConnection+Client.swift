/// Client-side helpers for the standard interfaces a BlueZ client uses (D-Bus Specification,
/// "Standard Interfaces"; spec/bluez.md, "Objects a client sees").
extension DBusConnection {
    /// `org.freedesktop.DBus.Properties.Get`, the variant unwrapped.
    public func getProperty(destination: String, path: DBusObjectPath, interface: String, name: String,
                            timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> DBusValue
    {
        let reply = try await call(destination: destination, path: path, interface: StandardInterface.properties,
                                   method: "Get", arguments: [.string(interface), .string(name)], timeout: timeout)
        guard case let .variant(v)? = reply.body.first else {
            throw .typeMismatch(expected: "v", actual: reply.signature)
        }
        return v
    }

    /// `org.freedesktop.DBus.Properties.GetAll` as a dictionary of unwrapped values.
    public func getAllProperties(destination: String, path: DBusObjectPath, interface: String,
                                 timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError)
        -> [String: DBusValue]
    {
        try await call(destination: destination, path: path, interface: StandardInterface.properties,
                       method: "GetAll", arguments: [.string(interface)], timeout: timeout).decode(0)
    }

    /// `org.freedesktop.DBus.Properties.Set` (the value is wrapped in a variant here).
    public func setProperty(destination: String, path: DBusObjectPath, interface: String, name: String,
                            value: DBusValue, timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError)
    {
        _ = try await call(destination: destination, path: path, interface: StandardInterface.properties,
                           method: "Set", arguments: [.string(interface), .string(name), .variant(value)],
                           timeout: timeout)
    }

    /// `org.freedesktop.DBus.ObjectManager.GetManagedObjects` (BlueZ: destination `org.bluez`, path `/`).
    public func managedObjects(destination: String, path: DBusObjectPath = .root,
                               timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError)
        -> [DBusObjectPath: [String: [String: DBusValue]]]
    {
        try await call(destination: destination, path: path, interface: StandardInterface.objectManager,
                       method: "GetManagedObjects", timeout: timeout).decode(0)
    }

    /// `org.freedesktop.DBus.Introspectable.Introspect`: the XML text.
    public func introspect(destination: String, path: DBusObjectPath,
                           timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> String
    {
        try await call(destination: destination, path: path, interface: StandardInterface.introspectable,
                       method: "Introspect", timeout: timeout).decode(0)
    }
}

extension DBusMatchRule {
    /// The bus' `NameOwnerChanged(name, old, new)` for one name: a service (or, with a unique
    /// name, a client) appearing or vanishing, e.g. to end a client's notify sessions when it
    /// disconnects (spec/bluez.md, behaviour 2).
    public static func nameOwnerChanged(_ name: String) -> DBusMatchRule {
        DBusMatchRule(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
                      path: "/org/freedesktop/DBus", arguments: [0: name])
    }
}

/// One object of a remote service (destination + path), e.g. a BlueZ characteristic: method
/// calls, properties and its `PropertiesChanged` signals without repeating the addressing
/// (spec/bluez.md, "Objects a client sees").
public struct DBusRemoteObject: Sendable {
    public let connection: DBusConnection
    public let destination: String
    public let path: DBusObjectPath

    public init(connection: DBusConnection, destination: String, path: DBusObjectPath) {
        self.connection = connection
        self.destination = destination
        self.path = path
    }

    /// Calls `interface.method` on this object (see ``DBusConnection/call(destination:path:interface:method:arguments:timeout:)``).
    public func call(_ interface: String, _ method: String, _ arguments: [DBusValue] = [],
                     timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> DBusMessage
    {
        try await connection.call(destination: destination, path: path, interface: interface, method: method,
                                  arguments: arguments, timeout: timeout)
    }

    /// Calls and decodes the first reply argument as `T`.
    public func call<T: DBusRepresentable>(_ interface: String, _ method: String, _ arguments: [DBusValue] = [],
                                           returning: T.Type, timeout: Duration = DBusConnection.defaultTimeout)
        async throws(DBusError) -> T
    {
        try await call(interface, method, arguments, timeout: timeout).decode(0, as: T.self)
    }

    /// One property (variant unwrapped).
    public func property(_ interface: String, _ name: String,
                         timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> DBusValue
    {
        try await connection.getProperty(destination: destination, path: path, interface: interface, name: name,
                                         timeout: timeout)
    }

    /// All readable properties of `interface`.
    public func properties(_ interface: String,
                           timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> [String: DBusValue]
    {
        try await connection.getAllProperties(destination: destination, path: path, interface: interface,
                                              timeout: timeout)
    }

    /// Sets a property.
    public func setProperty(_ interface: String, _ name: String, _ value: DBusValue,
                            timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError)
    {
        try await connection.setProperty(destination: destination, path: path, interface: interface, name: name,
                                         value: value, timeout: timeout)
    }

    /// `PropertiesChanged` of this object (for `interface` only, if given), subscribed before
    /// this returns.
    public func propertiesChanged(interface: String? = nil) async throws(DBusError) -> DBusSignalStream {
        try await connection.signals(matching: .propertiesChanged(sender: destination, path: path, interface: interface))
    }
}

extension DBusConnection {
    /// A handle on `path` at `destination`.
    public func object(_ destination: String, _ path: DBusObjectPath) -> DBusRemoteObject {
        DBusRemoteObject(connection: self, destination: destination, path: path)
    }
}
