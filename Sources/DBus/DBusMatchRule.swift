/// A signal match rule (D-Bus Specification, "Match Rules"), sent to the bus with `AddMatch`
/// and also checked locally to route messages to the right subscription.
public struct DBusMatchRule: Hashable, Sendable, CustomStringConvertible {
    /// `sender=`: a unique (`:1.5`) or well-known name (`org.bluez`; tracked to its owner).
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: DBusObjectPath?
    /// `path_namespace=`: the path itself or anything below it.
    public var pathNamespace: DBusObjectPath?
    /// `argN=`: string argument N equals the value.
    public var arguments: [Int: String] = [:]
    /// `argNpath=`: string/path argument N equals the value, or one is a `/`-ending prefix of the other.
    public var argumentPaths: [Int: String] = [:]
    /// `arg0namespace=`: argument 0 is the namespace or a dotted name below it.
    public var arg0Namespace: String?

    public init(sender: String? = nil, interface: String? = nil, member: String? = nil,
                path: DBusObjectPath? = nil, pathNamespace: DBusObjectPath? = nil,
                arguments: [Int: String] = [:], argumentPaths: [Int: String] = [:], arg0Namespace: String? = nil)
    {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.arguments = arguments
        self.argumentPaths = argumentPaths
        self.arg0Namespace = arg0Namespace
    }

    /// `PropertiesChanged` on `path` (optionally only for `interface`, matched on arg0), as
    /// BlueZ sends for characteristic values (spec/bluez.md).
    public static func propertiesChanged(sender: String? = nil, path: DBusObjectPath? = nil,
                                         interface: String? = nil) -> DBusMatchRule
    {
        DBusMatchRule(sender: sender, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                      path: path, arguments: interface.map { [0: $0] } ?? [:])
    }

    /// ObjectManager `InterfacesAdded`/`InterfacesRemoved` (`member` picks one, nil both).
    public static func objectManager(sender: String? = nil, member: String? = nil) -> DBusMatchRule {
        DBusMatchRule(sender: sender, interface: "org.freedesktop.DBus.ObjectManager", member: member)
    }

    /// The rule text for `AddMatch`, values quoted as the specification requires
    /// (an apostrophe becomes `'\''`).
    public var ruleString: String {
        func q(_ v: String) -> String { "'" + v.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        var parts = ["type='signal'"]
        if let sender { parts.append("sender=" + q(sender)) }
        if let interface { parts.append("interface=" + q(interface)) }
        if let member { parts.append("member=" + q(member)) }
        if let path { parts.append("path=" + q(path.rawValue)) }
        if let pathNamespace { parts.append("path_namespace=" + q(pathNamespace.rawValue)) }
        for (n, v) in arguments.sorted(by: { $0.key < $1.key }) { parts.append("arg\(n)=" + q(v)) }
        for (n, v) in argumentPaths.sorted(by: { $0.key < $1.key }) { parts.append("arg\(n)path=" + q(v)) }
        if let arg0Namespace { parts.append("arg0namespace=" + q(arg0Namespace)) }
        return parts.joined(separator: ",")
    }

    public var description: String { ruleString }

    /// Checks names and argument indexes (0…63) before the rule is sent.
    func validate() throws(DBusError) {
        if let sender { try Names.busName(sender) }
        if let interface { try Names.interface(interface) }
        if let member { try Names.member(member) }
        if let path { try Names.path(path) }
        if let pathNamespace { try Names.path(pathNamespace) }
        guard path == nil || pathNamespace == nil else {
            throw .invalidArgument("a match rule cannot have both path and path_namespace")
        }
        for n in Array(arguments.keys) + Array(argumentPaths.keys) where !(0...63).contains(n) {
            throw .invalidArgument("match rule argument index \(n) is outside 0…63")
        }
        for v in Array(arguments.values) + Array(argumentPaths.values) + [arg0Namespace ?? ""]
        where v.containsNUL {
            throw .invalidArgument("match rule value contains NUL")
        }
    }

    /// Whether a signal matches (sender compared with the name itself or its current owner).
    func matches(_ m: DBusMessage, senderOwner: String?) -> Bool {
        guard m.kind == .signal else { return false }
        if let sender, m.sender != sender, m.sender == nil || m.sender != senderOwner { return false }
        if let interface, m.interface != interface { return false }
        if let member, m.member != member { return false }
        if let path, m.path != path { return false }
        if let ns = pathNamespace {
            guard let p = m.path, p == ns || p.isDescendant(of: ns) else { return false }
        }
        for (n, v) in arguments {
            guard n < m.body.count, case let .string(s) = m.body[n], s == v else { return false }
        }
        for (n, v) in argumentPaths {
            guard n < m.body.count else { return false }
            let s: String
            switch m.body[n] {
            case let .string(x): s = x
            case let .objectPath(p): s = p.rawValue
            default: return false
            }
            let ok = s == v || (v.hasSuffix("/") && s.hasPrefix(v)) || (s.hasSuffix("/") && v.hasPrefix(s))
            if !ok { return false }
        }
        if let ns = arg0Namespace {
            guard case let .string(s)? = m.body.first, s == ns || s.hasPrefix(ns + ".") else { return false }
        }
        return true
    }
}
