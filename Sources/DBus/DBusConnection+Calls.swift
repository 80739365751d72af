import CDBus

extension DBusConnection {
    /// The default method-call timeout (libdbus' own default is 25 s).
    public static let defaultTimeout: Duration = .seconds(25)

    /// Calls `interface.method` on `path` at `destination` and returns the method return
    /// (D-Bus Specification, "Message Types: METHOD_CALL").
    ///
    /// Throws ``DBusError/remote(name:message:)`` for an error reply (name kept verbatim),
    /// ``DBusError/timeout(method:milliseconds:)`` when no reply came within `timeout`,
    /// ``DBusError/disconnected`` when the connection is or goes down, ``DBusError/cancelled``
    /// when the task is cancelled (the pending call is cancelled too), and
    /// ``DBusError/invalidArgument(_:)`` for names, paths or values D-Bus would reject.
    public func call(
        destination: String?, path: DBusObjectPath, interface: String?, method: String,
        arguments: [DBusValue] = [], timeout: Duration = DBusConnection.defaultTimeout
    ) async throws(DBusError) -> DBusMessage {
        try await box.call(destination: destination, path: path, interface: interface, method: method,
                           arguments: arguments, timeout: timeout)
    }

    /// The same call, its outcome handed to `completion` instead of returned: called once, on the
    /// connection's loop thread when the reply (or the timeout) comes, or on the caller's thread
    /// when the call cannot be sent or its reply was already in when it was sent (never inside
    /// the connection's lock: a completion may make the next call); it must not block. No task waits meanwhile, so a caller that
    /// already runs on the loop pays no hand-off to a task and back (docs/dbus.md, "Calls").
    /// Nothing cancels it but the connection's end (``DBusError/disconnected``).
    public func call(
        destination: String?, path: DBusObjectPath, interface: String?, method: String,
        arguments: [DBusValue] = [], timeout: Duration = DBusConnection.defaultTimeout,
        completion: @escaping @Sendable (Result<DBusMessage, DBusError>) -> Void
    ) {
        do throws(DBusError) {
            _ = try box.startCall(destination: destination, path: path, interface: interface, method: method,
                                  arguments: arguments, timeout: timeout, callback: completion)
        } catch {
            completion(.failure(error))
        }
    }

    /// Sends a method call without waiting for (or wanting) a reply.
    public func callNoReply(destination: String?, path: DBusObjectPath, interface: String?, method: String,
                            arguments: [DBusValue] = []) throws(DBusError)
    {
        let msg = try MessageBuilder.methodCall(destination: destination, path: path, interface: interface,
                                                member: method, arguments: arguments)
        dbus_message_set_no_reply(msg, 1)
        try box.send(msg)
    }

    /// Emits a signal from this connection (D-Bus Specification, "Message Types: SIGNAL");
    /// `destination` makes it unicast.
    public func emitSignal(path: DBusObjectPath, interface: String, member: String,
                           arguments: [DBusValue] = [], destination: String? = nil) throws(DBusError)
    {
        let msg = try MessageBuilder.signal(path: path, interface: interface, member: member,
                                            destination: destination, arguments: arguments)
        try box.send(msg)
    }

    // MARK: Bus names (D-Bus Specification, "Message Bus Messages")

    /// Flags of `RequestName`.
    public struct RequestNameFlags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let allowReplacement = RequestNameFlags(rawValue: 1)
        public static let replaceExisting = RequestNameFlags(rawValue: 2)
        public static let doNotQueue = RequestNameFlags(rawValue: 4)
    }

    /// The answer to `RequestName`.
    public enum RequestNameReply: UInt32, Sendable {
        case primaryOwner = 1, inQueue = 2, exists = 3, alreadyOwner = 4
    }

    /// Asks the bus for a well-known name (`org.freedesktop.DBus.RequestName`).
    @discardableResult
    public func requestName(_ name: String, flags: RequestNameFlags = [.doNotQueue],
                            timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> RequestNameReply
    {
        try Names.busName(name)
        let reply = try await busCall("RequestName", [.string(name), .uint32(flags.rawValue)], timeout: timeout)
        let code: UInt32 = try reply.decode(0)
        guard let r = RequestNameReply(rawValue: code) else {
            throw .invalidArgument("RequestName answered \(code)")
        }
        return r
    }

    /// Gives up a well-known name (`ReleaseName`); returns the bus' code (1 released,
    /// 2 non-existent, 3 not owner).
    @discardableResult
    public func releaseName(_ name: String, timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> UInt32 {
        try Names.busName(name)
        return try await busCall("ReleaseName", [.string(name)], timeout: timeout).decode(0)
    }

    /// The unique name owning `name`, or `nil` if nobody does (`GetNameOwner`).
    public func nameOwner(_ name: String, timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> String? {
        try Names.busName(name)
        do {
            return try await busCall("GetNameOwner", [.string(name)], timeout: timeout).decode(0)
        } catch {
            if error.remoteName == DBusErrorName.nameHasNoOwner { return nil }
            throw error
        }
    }

    func busCall(_ method: String, _ args: [DBusValue], timeout: Duration = DBusConnection.defaultTimeout)
        async throws(DBusError) -> DBusMessage
    {
        try await call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                       interface: "org.freedesktop.DBus", method: method, arguments: args, timeout: timeout)
    }
}

extension ConnectionBox {
    func call(
        destination: String?, path: DBusObjectPath, interface: String?, method: String,
        arguments: [DBusValue], timeout: Duration
    ) async throws(DBusError) -> DBusMessage {
        let pending = try startCall(destination: destination, path: path, interface: interface, method: method,
                                    arguments: arguments, timeout: timeout, callback: nil)
        let b = self
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { pending.attach($0) }
        } onCancel: {
            pending.resolve(.failure(.cancelled))
            _ = b.perform(.cancel(pending.id))
        }
        return try result.get()
    }

    /// Builds and sends the call; its outcome goes to `callback` when there is one, else to the
    /// continuation attached to the returned box.
    func startCall(
        destination: String?, path: DBusObjectPath, interface: String?, method: String,
        arguments: [DBusValue], timeout: Duration, callback: (@Sendable (Result<DBusMessage, DBusError>) -> Void)?
    ) throws(DBusError) -> PendingBox {
        let msg = try MessageBuilder.methodCall(destination: destination, path: path, interface: interface,
                                                member: method, arguments: arguments)
        if dbus_message_contains_unix_fds(msg) != 0 {
            switch canPassUnixFDs() {
            case true?:
                break
            case false?:
                dbus_message_unref(msg)
                throw .invalidArgument("this connection cannot pass unix fds")
            case nil:
                dbus_message_unref(msg)
                throw .disconnected
            }
        }
        let ms = Int(max(1, min(timeout.milliseconds, Int64(Int32.max - 1))))
        let b = self
        let pending = b.state.withLock { s -> PendingBox? in
            guard !s.closed else { return nil }
            let p = PendingBox(id: s.makeID(), interface: interface, member: method, timeoutMs: ms, connection: b, callback: callback)
            s.pendingBoxes[p.id] = p
            return p
        }
        guard let pending else {
            dbus_message_unref(msg)
            throw .disconnected
        }
        guard b.perform(.call(ConnectionBox.Handle(msg), timeoutMs: Int32(ms), pending)) else {
            dbus_message_unref(msg)
            b.state.withLock { _ = $0.pendingBoxes.removeValue(forKey: pending.id) }
            throw .disconnected
        }
        if callback != nil { pending.arm() }  // out of `perform`'s lock: a completion may call again
        return pending
    }

}
