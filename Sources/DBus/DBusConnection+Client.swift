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
