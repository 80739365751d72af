/// A configuration problem: the key path (`devices[1].address`), the line, and what is wrong.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let line: Int?
    public let message: String

    public init(path: String, line: Int?, message: String) {
        self.path = path
        self.line = line
        self.message = message
    }

    public var description: String {
        var s = ""
        if let line, line > 0 { s += "line \(line): " }
        if !path.isEmpty { s += "\(path): " }
        return s + message
    }
}
