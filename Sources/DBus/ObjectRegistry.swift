/// Standard interface names (D-Bus Specification, "Standard Interfaces").
enum StandardInterface {
    static let introspectable = "org.freedesktop.DBus.Introspectable"
    static let properties = "org.freedesktop.DBus.Properties"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"
    static let peer = "org.freedesktop.DBus.Peer"
}

/// The exported objects of one connection (a value held in the connection's locked state).
struct ObjectRegistry {
    /// Interfaces per path, in export order.
    var objects: [DBusObjectPath: [DBusInterface]] = [:]
    var managers: Set<DBusObjectPath> = []

    func interface(_ path: DBusObjectPath, _ name: String) -> DBusInterface? {
        objects[path]?.first { $0.name == name }
    }

    mutating func update(_ path: DBusObjectPath, _ name: String, _ body: (inout DBusInterface) -> Void) {
        guard var list = objects[path], let i = list.firstIndex(where: { $0.name == name }) else { return }
        body(&list[i])
        objects[path] = list
    }

    /// The nearest ObjectManager strictly above `path`.
    func manager(for path: DBusObjectPath) -> DBusObjectPath? {
        var p = path.parent
        while let q = p {
            if managers.contains(q) { return q }
            p = q.parent
        }
        return nil
    }

    /// Whether anything is exported at or below `path`.
    func exists(_ path: DBusObjectPath) -> Bool {
        objects[path] != nil || managers.contains(path)
            || objects.keys.contains { $0.isDescendant(of: path) } || managers.contains { $0.isDescendant(of: path) }
    }

    /// Names of the direct children of `path` that lead to exported objects.
    func children(of path: DBusObjectPath) -> [String] {
        var names = Set<String>()
        for p in Array(objects.keys) + Array(managers) where p.isDescendant(of: path) {
            let rest = p.rawValue.dropFirst(path.rawValue == "/" ? 1 : path.rawValue.count + 1)
            if let first = rest.split(separator: "/").first { names.insert(String(first)) }
        }
        return names.sorted()
    }

    /// `a{sv}` of an interface's readable properties.
    static func readable(_ iface: DBusInterface) -> DBusValue {
        .dictionary(key: .string, value: .variant, iface.properties.filter { $0.access != .write }.map {
            DBusDictEntry(.string($0.name), .variant($0.value))
        })
    }

    /// `a{sa{sv}}` of an object's interfaces (only those named, if given).
    func interfacesAndProperties(_ path: DBusObjectPath, only: Set<String>? = nil) -> DBusValue {
        let list = (objects[path] ?? []).filter { only?.contains($0.name) ?? true }
        return .dictionary(key: .string, value: .properties, list.map {
            DBusDictEntry(.string($0.name), ObjectRegistry.readable($0))
        })
    }

    /// `GetManagedObjects`' `a{oa{sa{sv}}}`: every object below `manager`.
    func managedObjects(_ manager: DBusObjectPath) -> DBusValue {
        let paths = objects.keys.filter { $0.isDescendant(of: manager) }.sorted()
        return .dictionary(key: .objectPath, value: .dictionary(key: .string, value: .properties), paths.map {
            DBusDictEntry(.objectPath($0), interfacesAndProperties($0))
        })
    }

    /// Introspection XML for `path` (D-Bus Specification, "Introspection Data Format"), or `nil`
    /// if nothing is exported at or below it.
    func introspect(_ path: DBusObjectPath) -> String? {
        guard exists(path) else { return nil }
        var x = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>

        """
        x += """
          <interface name="\(StandardInterface.introspectable)">
            <method name="Introspect"><arg name="xml" type="s" direction="out"/></method>
          </interface>
          <interface name="\(StandardInterface.peer)">
            <method name="Ping"/>
            <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
          </interface>

        """
        if let list = objects[path] {
            x += """
              <interface name="\(StandardInterface.properties)">
                <method name="Get"><arg name="interface_name" type="s" direction="in"/><arg name="property_name" type="s" direction="in"/><arg name="value" type="v" direction="out"/></method>
                <method name="GetAll"><arg name="interface_name" type="s" direction="in"/><arg name="props" type="a{sv}" direction="out"/></method>
                <method name="Set"><arg name="interface_name" type="s" direction="in"/><arg name="property_name" type="s" direction="in"/><arg name="value" type="v" direction="in"/></method>
                <signal name="PropertiesChanged"><arg name="interface_name" type="s"/><arg name="changed_properties" type="a{sv}"/><arg name="invalidated_properties" type="as"/></signal>
              </interface>

            """
            for iface in list { x += Self.xml(iface) }
        }
        if managers.contains(path) {
            x += """
              <interface name="\(StandardInterface.objectManager)">
                <method name="GetManagedObjects"><arg name="objects" type="a{oa{sa{sv}}}" direction="out"/></method>
                <signal name="InterfacesAdded"><arg name="object" type="o"/><arg name="interfaces" type="a{sa{sv}}"/></signal>
                <signal name="InterfacesRemoved"><arg name="object" type="o"/><arg name="interfaces" type="as"/></signal>
              </interface>

            """
        }
        for child in children(of: path) { x += "  <node name=\"\(escape(child))\"/>\n" }
        x += "</node>\n"
        return x
    }

    private static func xml(_ iface: DBusInterface) -> String {
        func arg(_ a: DBusArgument, _ direction: String?) -> String {
            var s = "<arg"
            if let n = a.name { s += " name=\"\(escape(n))\"" }
            s += " type=\"\(escape(a.type.signature))\""
            if let direction { s += " direction=\"\(direction)\"" }
            return s + "/>"
        }
        var x = "  <interface name=\"\(escape(iface.name))\">\n"
        for m in iface.methods {
            let args = m.inArguments.map { arg($0, "in") } + m.outArguments.map { arg($0, "out") }
            x += args.isEmpty ? "    <method name=\"\(m.name)\"/>\n"
                : "    <method name=\"\(m.name)\">" + args.joined() + "</method>\n"
        }
        for s in iface.signals {
            let args = s.arguments.map { arg($0, nil) }
            x += args.isEmpty ? "    <signal name=\"\(s.name)\"/>\n"
                : "    <signal name=\"\(s.name)\">" + args.joined() + "</signal>\n"
        }
        for p in iface.properties {
            let open = "    <property name=\"\(p.name)\" type=\"\(escape(p.type.signature))\" access=\"\(p.access.rawValue)\""
            if p.emitsChanged == .true {
                x += open + "/>\n"
            } else {
                x += open + "><annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(p.emitsChanged.rawValue)\"/></property>\n"
            }
        }
        return x + "  </interface>\n"
    }
}

/// XML attribute escaping.
func escape(_ s: String) -> String {
    var out = ""
    for c in s {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&apos;"
        default: out.append(c)
        }
    }
    return out
}
