import DBus

extension PrivateBus {
    /// A client connection to this bus (10 s to connect); the caller closes it.
    public func connect() async throws -> DBusConnection {
        try await DBusConnection.connect(.address(address), timeout: .seconds(10))
    }
}
