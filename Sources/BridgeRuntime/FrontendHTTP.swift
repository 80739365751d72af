import Foundation

/// One HTTP/1.1 request as the frontend's server reads it: the request line, the headers and a
/// `Content-Length` body (no chunked bodies: nothing the pages send needs them).
struct HTTPRequest: Sendable, Equatable {
    var method: String
    /// The target's path, as sent (nothing the routes accept is percent-encoded).
    var path: String
    /// The query's parameters, percent-decoded.
    var query: [String: String] = [:]
    /// Header names in lower case.
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []

    static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.query == b.query && a.body == b.body
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }

    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The cookies of the `Cookie` headers, by name.
    var cookies: [String: String] {
        var out: [String: String] = [:]
        for h in headers where h.name == "cookie" {
            for pair in h.value.split(separator: ";") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                guard kv.count == 2 else { continue }
                out[kv[0].trimmingCharacters(in: .whitespaces)] = kv[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return out
    }

    /// Why a request head could not be read.
    enum ParseError: Error, Equatable {
        case malformed(String)
        case tooLarge
        case lengthRequired
    }

    /// The longest body accepted.
    static let maxBody = 64 * 1024

    /// Parses a head (up to and including the blank line). The body is read after it, as long as
    /// ``contentLength``.
    static func parse(head: [UInt8]) throws(ParseError) -> HTTPRequest {
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n")
        while lines.last == "" { lines.removeLast() }
        guard let first = lines.first else { throw .malformed("empty request") }
        let parts = first.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ $0.isLetter && $0.isUppercase }),
              parts[1].hasPrefix("/"), parts[2].hasPrefix("HTTP/1.") else {
            throw .malformed("expected an HTTP/1.x request line")
        }
        var request = HTTPRequest(method: String(parts[0]), path: "/")
        let target = parts[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        request.path = String(target[0])
        if target.count == 2 {
            for pair in target[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = String(kv[0]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(kv[0])
                let value = kv.count == 2 ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(kv[1])) : ""
                request.query[key] = value
            }
        }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { throw .malformed("malformed header line") }
            request.headers.append((line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        if request.header("transfer-encoding") != nil { throw .lengthRequired }
        if let length = request.contentLength, length > maxBody { throw .tooLarge }
        if request.header("content-length") != nil, request.contentLength == nil { throw .malformed("malformed Content-Length") }
        return request
    }

    var contentLength: Int? { header("content-length").flatMap { Int($0) }.flatMap { $0 >= 0 ? $0 : nil } }
}

/// A complete HTTP/1.1 answer (the connection is closed after it).
struct HTTPResponse: Sendable, Equatable {
    var status: Int
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    /// `HEAD`: the headers only.
    var omitBody = false

    static func == (a: HTTPResponse, b: HTTPResponse) -> Bool {
        a.status == b.status && a.body == b.body && a.headers.map(\.0) == b.headers.map(\.0) && a.headers.map(\.1) == b.headers.map(\.1)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 202: "Accepted"
        case 303: "See Other"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 421: "Misdirected Request"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status"
        }
    }

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    var bytes: [UInt8] {
        var out = Array("HTTP/1.1 \(status) \(Self.reason(status))\r\n".utf8)
        for (name, value) in headers + [("Content-Length", "\(body.count)"), ("Connection", "close")] {
            out += Array("\(name): \(value)\r\n".utf8)
        }
        out += Array("\r\n".utf8)
        if !omitBody { out += body }
        return out
    }

    /// A JSON body.
    static func json(_ status: Int, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")] + headers,
                     body: Array(text.utf8))
    }

    /// `{"error": message}`.
    static func error(_ status: Int, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        json(status, #"{"error":\#(jsonString(message))}"#, headers: headers)
    }
}

/// The names a server answers to: a request whose `Host` (or, when it changes state, whose
/// `Origin`) names another is refused, so a page of another site whose name was made to point
/// at the bridge (DNS rebinding) reaches nothing. Allowed: the loopback names (`localhost`,
/// `127.x.y.z`, `[::1]`), the listen address when it is a specific one, and the configured
/// `allowed_hosts`; the port is not compared. A request without `Host` (HTTP/1.0, a script)
/// passes: browsers always send it.
struct HostAllowList: Sendable, Equatable {
    /// Lower case, IPv6 without brackets.
    var names: Set<String>

    /// `listen`: the address listened on (added unless it is `0.0.0.0` or `::`).
    init(listen: String, allowed: [String]) {
        names = Set(allowed.map { Self.name(ofHost: $0) ?? $0.lowercased() })
        if listen != "0.0.0.0", listen != "::" { names.insert(listen.lowercased()) }
    }

    /// The loopback names only.
    static let loopback = HostAllowList(listen: "0.0.0.0", allowed: [])

    func allows(host: String?) -> Bool {
        guard let host else { return true }
        guard let name = Self.name(ofHost: host) else { return false }
        return Self.isLoopback(name) || names.contains(name)
    }

    /// An `Origin` (`scheme://host[:port]`) naming an allowed host; `null` and others are not.
    func allows(origin: String) -> Bool {
        let lower = origin.lowercased()
        guard let scheme = lower.range(of: "://"), ["http", "https"].contains(lower[..<scheme.lowerBound]) else { return false }
        let rest = lower[scheme.upperBound...]
        guard !rest.isEmpty, !rest.contains("/") else { return false }
        return allows(host: String(rest))
    }

    /// `name`, `name:port`, `[v6]` or `[v6]:port` → the name in lower case (a trailing dot
    /// dropped), nil when malformed.
    static func name(ofHost host: String) -> String? {
        var text = Substring(host.lowercased().trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let after = text[text.index(after: close)...]
            guard after.isEmpty || (after.hasPrefix(":") && after.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            return String(text[text.index(after: text.startIndex)..<close])
        }
        if let colon = text.lastIndex(of: ":") {
            guard text[text.index(after: colon)...].allSatisfy(\.isNumber) else { return nil }
            text = text[..<colon]
        }
        if text.hasSuffix(".") { text = text.dropLast() }
        guard !text.isEmpty, !text.contains(":") else { return nil }
        return String(text)
    }

    /// `localhost`, `127.x.y.z` or `::1`.
    static func isLoopback(_ name: String) -> Bool {
        if name == "localhost" || name == "::1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}

/// `text` as a JSON string literal.
func jsonString(_ text: String) -> String {
    var out = "\""
    for u in text.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where u.value < 0x20: out += String(format: "\\u%04x", u.value)
        default: out.unicodeScalars.append(u)
        }
    }
    return out + "\""
}

/// Server-Sent Events framing (the WHATWG HTML standard, "Server-sent events"): fields, one per
/// line, and a blank line that dispatches the event. A value with line breaks becomes several
/// `data:` lines, which the browser joins with `\n`.
enum SSE {
    static func event(_ name: String? = nil, id: String? = nil, data: String) -> [UInt8] {
        var out = ""
        if let name { out += "event: \(name)\n" }
        if let id { out += "id: \(id)\n" }
        for line in data.split(separator: "\n", omittingEmptySubsequences: false) {
            out += "data: \(line.replacingOccurrences(of: "\r", with: ""))\n"
        }
        return Array((out + "\n").utf8)
    }

    /// A comment line: ignored by the browser, keeps proxies and the connection awake.
    static func comment(_ text: String) -> [UInt8] { Array(": \(text)\n\n".utf8) }

    /// The reconnection delay the browser uses after the stream ends.
    static func retry(milliseconds: Int) -> [UInt8] { Array("retry: \(milliseconds)\n\n".utf8) }

    /// The response head of a stream (no length: the body runs until the connection closes).
    static let head = Array(("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-store\r\n"
        + "X-Accel-Buffering: no\r\nConnection: close\r\n\r\n").utf8)
}
