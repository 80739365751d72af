import CDBus

extension DBusConnection {
    /// Exports `interfaces` at `path` (added to any already there). Remote callers then get the
    /// methods, `org.freedesktop.DBus.Properties` (Get/GetAll/Set), `Introspectable` and `Peer`
    /// (D-Bus Specification, "Standard Interfaces"). If an ObjectManager sits above `path`,
    /// `InterfacesAdded` is emitted. Exporting an interface name twice on one path throws.
    public func export(_ path: DBusObjectPath, interfaces: [DBusInterface]) throws(DBusError) {
        try Names.path(path)
        for i in interfaces { try i.validate() }
        let standard: Set = [StandardInterface.properties, StandardInterface.introspectable,
                             StandardInterface.peer, StandardInterface.objectManager]
        let names = interfaces.map(\.name)
        guard Set(names).count == names.count, standard.isDisjoint(with: names) else {
            throw .invalidArgument("interfaces \(names) repeat a name or redefine a standard interface")
        }
        let manager: (DBusObjectPath, DBusValue)? = try box.state.withLock { (s) throws(DBusError) in
            guard !s.closed else { throw DBusError.disconnected }
            let existing = Set((s.registry.objects[path] ?? []).map(\.name))
            if let dup = names.first(where: existing.contains) {
                throw DBusError.invalidArgument("\(dup) is already exported at \(path)")
            }
            s.registry.objects[path, default: []].append(contentsOf: interfaces)
            guard let m = s.registry.manager(for: path) else { return nil }
            return (m, s.registry.interfacesAndProperties(path, only: Set(names)))
        }
        if let (m, added) = manager {
            try emitSignal(path: m, interface: StandardInterface.objectManager, member: "InterfacesAdded",
                           arguments: [.objectPath(path), added])
        }
    }

    /// Removes interfaces (all if `nil`) from `path`; emits `InterfacesRemoved` under an
    /// ObjectManager. Unknown names are ignored.
    public func unexport(_ path: DBusObjectPath, interfaces: [String]? = nil) throws(DBusError) {
        let result: (DBusObjectPath?, [String]) = box.state.withLock { s in
            guard let list = s.registry.objects[path] else { return (nil, []) }
            let removed = list.map(\.name).filter { interfaces?.contains($0) ?? true }
            let kept = list.filter { !removed.contains($0.name) }
            s.registry.objects[path] = kept.isEmpty ? nil : kept
            return (s.registry.manager(for: path), removed)
        }
        if let m = result.0, !result.1.isEmpty {
            try emitSignal(path: m, interface: StandardInterface.objectManager, member: "InterfacesRemoved",
                           arguments: [.objectPath(path), .strings(result.1)])
        }
    }

    /// Removes `path` and every object below it, deepest first (children before parents, as
    /// BlueZ removes a device's GATT objects before the device).
    public func unexportTree(_ path: DBusObjectPath) throws(DBusError) {
        let paths = box.state.withLock { s in
            s.registry.objects.keys.filter { $0 == path || $0.isDescendant(of: path) }
        }.sorted { $0.rawValue.count > $1.rawValue.count }
        for p in paths { try unexport(p) }
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` (D-Bus Specification,
    /// "org.freedesktop.DBus.ObjectManager"; BlueZ has it at `/`): `GetManagedObjects` lists
    /// every exported object below `path`, and exports/unexports below it emit
    /// `InterfacesAdded`/`InterfacesRemoved`.
    public func addObjectManager(at path: DBusObjectPath) throws(DBusError) {
        try Names.path(path)
        box.state.withLock { _ = $0.registry.managers.insert(path) }
    }

    /// The current value of an exported property.
    public func property(_ path: DBusObjectPath, interface: String, _ name: String) -> DBusValue? {
        box.state.withLock { s in s.registry.interface(path, interface)?.properties.first { $0.name == name }?.value }
    }

    /// Sets one exported property (see ``setProperties(_:interface:_:alwaysEmit:)``).
    public func setProperty(_ path: DBusObjectPath, interface: String, _ name: String, _ value: DBusValue,
                            alwaysEmit: Bool = false) throws(DBusError)
    {
        try setProperties(path, interface: interface, [name: value], alwaysEmit: alwaysEmit)
    }

    /// Sets exported properties and emits one `PropertiesChanged(interface, changed, invalidated)`
    /// for those whose value changed (all of them with `alwaysEmit`, as BlueZ does for `Value`
    /// after every read), honouring each property's ``DBusProperty/EmitsChanged``. Throws
    /// `invalidArgument` for an unknown property or a value of the wrong type (nothing is set).
    public func setProperties(_ path: DBusObjectPath, interface: String, _ values: [String: DBusValue],
                              alwaysEmit: Bool = false) throws(DBusError)
    {
        for v in values.values { try v.validate() }
        let (changed, invalidated) = try box.state.withLock { (s) throws(DBusError) -> ([DBusDictEntry], [String]) in
            guard let iface = s.registry.interface(path, interface) else {
                throw DBusError.invalidArgument("no interface \(interface) exported at \(path)")
            }
            for (name, v) in values {
                guard let p = iface.properties.first(where: { $0.name == name }) else {
                    throw DBusError.invalidArgument("no property \(name) on \(interface) at \(path)")
                }
                guard p.type == v.type else {
                    throw DBusError.invalidArgument("property \(name) has type \(p.type.signature), not \(v.signature)")
                }
            }
            var changed: [DBusDictEntry] = []
            var invalidated: [String] = []
            s.registry.update(path, interface) { iface in
                for i in iface.properties.indices {
                    guard let v = values[iface.properties[i].name] else { continue }
                    let differs = iface.properties[i].value != v
                    iface.properties[i].value = v
                    guard differs || alwaysEmit else { continue }
                    switch iface.properties[i].emitsChanged {
                    case .true: changed.append(DBusDictEntry(.string(iface.properties[i].name), .variant(v)))
                    case .invalidates: invalidated.append(iface.properties[i].name)
                    case .false: break
                    }
                }
            }
            return (changed, invalidated)
        }
        guard !changed.isEmpty || !invalidated.isEmpty else { return }
        try emitSignal(path: path, interface: StandardInterface.properties, member: "PropertiesChanged",
                       arguments: [.string(interface), .dictionary(key: .string, value: .variant, changed),
                                    .strings(invalidated)])
    }
}

extension ConnectionBox {
    /// Every incoming message that is not a method return or error (the loop; those go to `answer`).
    func handleIncoming(_ raw: OpaquePointer) -> DBusHandlerResult {
        let m: DBusMessage
        do {
            m = try DBusMessage(copying: raw)
        } catch {
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
        switch m.kind {
        case .signal:
            if m.interface == "org.freedesktop.DBus.Local", m.member == "Disconnected" {
                markClosed()
                return DBUS_HANDLER_RESULT_HANDLED
            }
            deliverSignal(m)
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        case .methodCall:
            handleMethodCall(m)
            return DBUS_HANDLER_RESULT_HANDLED
        case .methodReturn, .error:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    func reply(_ call: DBusMessage, _ values: [DBusValue]) {
        guard !call.noReplyExpected else { return }
        do {
            try send(MessageBuilder.methodReturn(to: call, arguments: values))
        } catch {
            replyError(call, DBusErrorName.failed, "reply could not be built: \(error)")
        }
    }

    func replyError(_ call: DBusMessage, _ name: String, _ text: String) {
        guard !call.noReplyExpected, let msg = try? MessageBuilder.error(to: call, name: name, message: text) else { return }
        try? send(msg)
    }

    func replyError(_ call: DBusMessage, _ error: any Error) {
        switch error {
        case let DBusError.remote(name, message): replyError(call, name, message)
        default: replyError(call, DBusErrorName.failed, "\(error)")
        }
    }

    private func handleMethodCall(_ m: DBusMessage) {
        let path = m.path ?? .root
        let member = m.member ?? ""
        switch (m.interface, member) {
        case (StandardInterface.introspectable?, "Introspect"), (nil, "Introspect"):
            if let xml = state.withLock({ $0.registry.introspect(path) }) {
                reply(m, [.string(xml)])
            } else {
                replyError(m, DBusErrorName.unknownObject, "No such object path '\(path)'")
            }
        case (StandardInterface.peer?, "Ping"), (nil, "Ping"):
            reply(m, [])
        case (StandardInterface.peer?, "GetMachineId"):
            var id = ""
            if let raw = dbus_try_get_local_machine_id(nil) {
                id = String(cString: raw)
                dbus_free(raw)
            }
            reply(m, [.string(id)])
        case (StandardInterface.properties?, _):
            handleProperties(m, path, member)
        case (StandardInterface.objectManager?, "GetManagedObjects"):
            let objects = state.withLock { s -> DBusValue? in
                s.registry.managers.contains(path) ? s.registry.managedObjects(path) : nil
            }
            if let objects { reply(m, [objects]) } else { unknownMethod(m) }
        default:
            let found = state.withLock { s -> (method: DBusMethod?, objectExists: Bool, interfaces: [String]) in
                guard let list = s.registry.objects[path] else { return (nil, false, []) }
                let ifaces = list.filter { m.interface == nil || $0.name == m.interface }
                return (ifaces.lazy.compactMap { $0.methods.first { $0.name == member } }.first, true, list.map(\.name))
            }
            guard found.objectExists else {
                return replyError(m, DBusErrorName.unknownObject, "No such object path '\(path)'")
            }
            guard let method = found.method else {
                if let name = m.interface, !found.interfaces.contains(name) {
                    return replyError(m, DBusErrorName.unknownInterface, "No such interface '\(name)' at object path '\(path)'")
                }
                return unknownMethod(m)
            }
            let expected = method.inArguments.map(\.type.signature).joined()
            guard m.signature == expected else {
                return replyError(m, DBusErrorName.invalidArgs,
                                  "\(member) expects signature \"\(expected)\", got \"\(m.signature)\"")
            }
            let outSignature = method.outArguments.map(\.type.signature).joined()
            let call = DBusMethodCall(message: m)
            let handler = method.handler
            runInOrder(on: path) {
                do {
                    let values = try await handler(call)
                    let got = values.map(\.signature).joined()
                    guard got == outSignature else {
                        return self.replyError(m, DBusErrorName.failed,
                                               "\(member) returned \"\(got)\", declared \"\(outSignature)\"")
                    }
                    self.reply(m, values)
                } catch {
                    self.replyError(m, error)
                }
            }
        }
    }

    /// Runs a handler in its own task. Calls to one object do not wait for each other: bluetoothd
    /// answers asynchronously (a second Connect while the first is pending gets InProgress, a
    /// Disconnect cancels a pending Connect), so a long handler must not block the next call.
    /// The task prefers the connection's loop: a handler that does not hop elsewhere runs and
    /// replies without leaving the loop thread (docs/dbus.md "The event loop").
    private func runInOrder(on path: DBusObjectPath, _ body: @escaping @Sendable () async -> Void) {
        Task(executorPreference: loop) { await body() }
    }

    private func unknownMethod(_ m: DBusMessage) {
        replyError(m, DBusErrorName.unknownMethod,
                   "No such method '\(m.member ?? "")' in interface '\(m.interface ?? "")' at object path '\(m.path ?? .root)' (signature '\(m.signature)')")
    }

    private func handleProperties(_ m: DBusMessage, _ path: DBusObjectPath, _ member: String) {
        let ifaceName: String? = m.body.first?.stringValue
        let lookup = state.withLock { s -> (objectExists: Bool, iface: DBusInterface?) in
            (s.registry.objects[path] != nil, ifaceName.flatMap { s.registry.interface(path, $0) })
        }
        guard lookup.objectExists else {
            return replyError(m, DBusErrorName.unknownObject, "No such object path '\(path)'")
        }
        switch (member, m.signature) {
        case ("GetAll", "s"):
            guard let iface = lookup.iface else {
                return replyError(m, DBusErrorName.unknownInterface, "No such interface '\(ifaceName ?? "")'")
            }
            reply(m, [ObjectRegistry.readable(iface)])
        case ("Get", "ss"), ("Set", "ssv"):
            guard let iface = lookup.iface else {
                return replyError(m, DBusErrorName.unknownInterface, "No such interface '\(ifaceName ?? "")'")
            }
            let name = m.body[1].stringValue ?? ""
            guard let p = iface.properties.first(where: { $0.name == name }) else {
                return replyError(m, DBusErrorName.unknownProperty, "No such property '\(name)' on '\(iface.name)'")
            }
            if member == "Get" {
                guard p.access != .write else {
                    return replyError(m, DBusErrorName.accessDenied, "Property '\(name)' is not readable")
                }
                return reply(m, [.variant(p.value)])
            }
            guard p.access != .read else {
                return replyError(m, DBusErrorName.propertyReadOnly, "Property '\(name)' is read-only")
            }
            guard case let .variant(newValue) = m.body[2], newValue.type == p.type else {
                return replyError(m, DBusErrorName.invalidArgs,
                                  "Property '\(name)' has type '\(p.type.signature)', got '\(m.body[2].unwrapped.signature)'")
            }
            let onSet = p.onSet
            let ifaceName = iface.name
            runInOrder(on: path) {
                do {
                    let stored = try await onSet?(newValue) ?? newValue
                    guard stored.type == p.type else {
                        throw DBusError.remote(name: DBusErrorName.invalidArgs, message: "refused value type")
                    }
                    try self.setStoredProperty(path, ifaceName, name, stored)
                    self.reply(m, [])
                } catch {
                    self.replyError(m, error)
                }
            }
        default:
            replyError(m, DBusErrorName.unknownMethod,
                       "No such method '\(member)' with signature '\(m.signature)' in \(StandardInterface.properties)")
        }
    }

    /// Stores a property value set remotely and emits `PropertiesChanged` (a connection-level
    /// twin of `DBusConnection.setProperties`, usable from the box).
    private func setStoredProperty(_ path: DBusObjectPath, _ interface: String, _ name: String,
                                   _ value: DBusValue) throws(DBusError)
    {
        let emit: DBusProperty.EmitsChanged? = state.withLock { s in
            var result: DBusProperty.EmitsChanged?
            s.registry.update(path, interface) { iface in
                guard let i = iface.properties.firstIndex(where: { $0.name == name }) else { return }
                if iface.properties[i].value != value { result = iface.properties[i].emitsChanged }
                iface.properties[i].value = value
            }
            return result
        }
        guard let emit, emit != .false else { return }
        let changed: [DBusDictEntry] = emit == .true ? [DBusDictEntry(.string(name), .variant(value))] : []
        let invalidated: [String] = emit == .invalidates ? [name] : []
        try send(MessageBuilder.signal(path: path, interface: StandardInterface.properties, member: "PropertiesChanged",
                                       arguments: [.string(interface), .dictionary(key: .string, value: .variant, changed),
                                                   .strings(invalidated)]))
    }
}
