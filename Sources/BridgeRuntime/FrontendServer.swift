import BinaryCoding
import BridgeConfig
import BridgeCore
import FlyingSocks
import Frontend
import Foundation
import Logging
import Reactor
import ServiceLifecycle

/// The web frontend (`frontend.listen`, docs/frontend.md): the pages, their live event stream
/// (Server-Sent Events fed by ``FrontendHub`` with what the bridge publishes on MQTT), and the
/// requests and commands they send, handed to the bridge as MQTT messages would be. With
/// `metrics` configured it serves `/metrics` too (the Prometheus endpoint of docs/metrics.md).
///
/// The HTTP layer is the metrics endpoint's: FlyingSocks sockets and our own HTTP/1.1, one
/// request per connection, answered and closed (an event stream stays open until the page goes
/// or the bridge stops). A `Service` listed before the bridge: made before it, stopped after it,
/// so pages see the bridge go offline before their stream closes.
public struct FrontendServer: Service {
    public let settings: FrontendSettings
    let listener: HTTPListener
    let logger: Logger
    let router: FrontendRouter

    /// At most 32 connections at once (event streams included), 8 from one address; a request
    /// within 10 s; a client that takes nothing written to it for 10 s is dropped.
    static let limits = HTTPListener.Limits(maxConnections: 32, maxPerClient: 8)
    /// The heartbeat of an event stream (an SSE comment).
    static let heartbeat: Duration = .seconds(15)

    /// Listens on `settings` and reads the token file, so a bad address or token stops the start
    /// with the reason (as does an address beyond loopback with neither a token nor
    /// `allow_unauthenticated`). `metrics`: also serve `/metrics` (bootstraps swift-metrics: make
    /// this before the bridge).
    public init(settings: FrontendSettings, hub: FrontendHub, metrics: Bool, logger: Logger) throws(StartupError) {
        try self.init(settings: settings, hub: hub, metrics: metrics, logger: logger, limits: Self.limits)
    }

    init(settings: FrontendSettings, hub: FrontendHub, metrics: Bool, logger: Logger, limits: HTTPListener.Limits) throws(StartupError) {
        self.settings = settings
        self.logger = logger
        var token: String?
        if let file = settings.authTokenFile {
            do { token = try Self.readToken(file) } catch { throw StartupError("frontend.auth_token_file \(file): \(error.description)") }
        } else if !settings.isLoopback, !settings.allowUnauthenticated {
            throw StartupError("frontend.auth_token_file: frontend.listen \(settings.listen) is reachable beyond this machine: "
                + "set frontend.auth_token_file, listen on 127.0.0.1, or set frontend.allow_unauthenticated: true")
        }
        listener = try HTTPListener(host: settings.host, port: settings.port, what: "frontend.listen \(settings.listen)", limits: limits)
        router = FrontendRouter(hub: hub, token: token,
                                metrics: metrics ? MetricsHandler(registry: PrometheusBackend.registry, process: PrometheusBackend.process) : nil,
                                hosts: HostAllowList(listen: settings.host, allowed: settings.hostNames))
    }

    struct TokenError: Error, Equatable { let description: String }

    /// The token: the file's text without surrounding white space; at least 8 characters, all
    /// of them printable ASCII that a cookie can carry (no space, `"`, `,`, `;` or `\`). The file
    /// must be readable by its owner only (mode 600 or stricter).
    static func readToken(_ path: String) throws(TokenError) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw TokenError(description: "cannot be read") }
        var info = stat()
        guard stat(path, &info) == 0 else { throw TokenError(description: "cannot be read") }
        guard info.st_mode & 0o077 == 0 else {
            throw TokenError(description: "group or others may read or write it (mode \(String(info.st_mode & 0o777, radix: 8))): chmod 600 \(path)")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count >= 8 else { throw TokenError(description: "the token must have at least 8 characters") }
        guard token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && !"\",;\\".unicodeScalars.contains($0) }) else {
            throw TokenError(description: "the token may hold printable ASCII only, without spaces, quotes, commas, semicolons or backslashes")
        }
        return token
    }

    public func run() async throws {
        if router.token == nil, !settings.isLoopback {
            logger.warning("web frontend on http://\(settings.listen)/ without a token (frontend.allow_unauthenticated): whoever reaches it drives the bridge")
        } else {
            logger.info("web frontend on http://\(settings.listen)/\(router.token == nil ? "" : " (token required)")")
        }
        let hub = router.hub
        LogTap.shared.set { level, message in hub.log(level: level.rawValue, message: message) }
        defer { LogTap.shared.set(nil) }
        try await listener.run { connection in await serve(connection) }
    }

    /// One connection: its request (within the request timeout), then one answer or an event stream.
    func serve(_ connection: AsyncSocket) async {
        let read = await listener.read(connection) { try await Self.readRequest($0) }
        let request: HTTPRequest
        switch read {
        case nil: return
        case let .failure(error)?:
            let response: HTTPResponse = switch error {
            case let .malformed(why): .error(400, why)
            case .tooLarge: .error(413, "the body is larger than \(HTTPRequest.maxBody) bytes")
            case .lengthRequired: .error(411, "send the body with a Content-Length")
            }
            _ = await listener.write(connection, response.bytes)
            return
        case let .success(r)?: request = r
        }
        switch await router.route(request) {
        case let .response(response):
            if await !listener.write(connection, response.bytes) { logger.debug("frontend: the answer was not sent") }
        case let .events(lastEventID):
            await stream(connection, lastEventID: lastEventID)
        }
    }

    /// An event stream: `hello`, the snapshot, `ready`, then every message the bridge publishes
    /// and a heartbeat, until the page goes (a write fails, or does not go on within the write
    /// timeout: a page that stopped reading) or the server stops.
    func stream(_ connection: AsyncSocket, lastEventID: String?) async {
        let hub = router.hub
        let subscription = hub.subscribe(lastEventID: lastEventID)
        defer { hub.unsubscribe(subscription.id) }
        let heartbeat = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.heartbeat)
                hub.ping(subscription.id)
            }
        }
        defer { heartbeat.cancel() }
        var first = SSE.head + SSE.retry(milliseconds: 2000)
        first += router.hello(reset: subscription.reset)
        for item in subscription.snapshot { first += router.event(item) }
        first += SSE.event("ready", data: "{}")
        guard await listener.write(connection, first) else { return logger.debug("frontend: an event stream ended") }
        for await event in subscription.events {
            let bytes = switch event {
            case let .item(item): router.event(item)
            case .ping: SSE.comment("ping")
            }
            guard await listener.write(connection, bytes) else { return logger.debug("frontend: an event stream ended") }
        }
    }

    /// Reads a request head (up to the blank line, at most 8 KiB) and its body.
    static func readRequest(_ connection: AsyncSocket) async throws -> Result<HTTPRequest, HTTPRequest.ParseError> {
        var bytes: [UInt8] = []
        var end: Int?
        while end == nil {
            guard bytes.count < MetricsServer.maxHead else { return .failure(.malformed("the request head is larger than 8 KiB")) }
            let chunk = try await connection.read(atMost: 4096)
            if chunk.isEmpty { throw SocketError.disconnected }
            bytes += chunk
            end = MetricsHandler.endOfHead(bytes)
        }
        var request: HTTPRequest
        do { request = try HTTPRequest.parse(head: Array(bytes[..<end!])) } catch { return .failure(error) }
        let length = request.contentLength ?? 0
        var body = Array(bytes[end!...])
        while body.count < length {
            let chunk = try await connection.read(atMost: min(4096, length - body.count))
            if chunk.isEmpty { throw SocketError.disconnected }
            body += chunk
        }
        request.body = Array(body.prefix(length))
        return .success(request)
    }
}

/// The frontend's routes, apart from the sockets (unit-tested on their own).
struct FrontendRouter: Sendable {
    let hub: FrontendHub
    /// nil: no authentication.
    let token: String?
    let metrics: MetricsHandler?
    /// The names requests may be for (421 for another: DNS rebinding), and a state-changing
    /// request's `Origin` may name (403 for another).
    var hosts = HostAllowList.loopback

    static let cookie = "gatt2mqtt_token"

    static let unauthorizedPage = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>gatt2mqtt: unauthorized</title></head>
        <body><h1>401 unauthorized</h1><p>This gatt2mqtt frontend needs its token: open <code>/?token=TOKEN</code> once
        (the token is in the file <code>frontend.auth_token_file</code> names); a cookie keeps it.</p></body></html>
        """

    /// What a request gets: one answer, or an event stream.
    enum Outcome: Sendable {
        case response(HTTPResponse)
        case events(lastEventID: String?)
    }

    /// Headers of every page and script.
    static let pageHeaders: [(String, String)] = [
        ("Cache-Control", "no-cache"), ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
        ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
    ]

    func route(_ r: HTTPRequest) async -> Outcome {
        guard hosts.allows(host: r.header("host")) else {
            return .response(.error(421, "this frontend does not answer to the name '\(r.header("host") ?? "")': "
                + "add it to frontend.allowed_hosts to use it"))
        }
        guard authorized(r) else {
            if r.query["token"] != nil, r.path != "/" {
                return .response(.error(401, "?token= is accepted on the page's address (/?token=TOKEN) only: send the cookie it sets, or Authorization: Bearer TOKEN",
                                        headers: [("WWW-Authenticate", #"Bearer realm="gatt2mqtt""#)]))
            }
            if r.method == "GET", r.header("accept")?.contains("text/html") == true {
                // A browser: a page that says what to do (and runs nothing).
                return .response(HTTPResponse(status: 401, headers: [("Content-Type", "text/html; charset=utf-8"), ("WWW-Authenticate", #"Bearer realm="gatt2mqtt""#)]
                    + Self.pageHeaders, body: Array(Self.unauthorizedPage.utf8)))
            }
            return .response(.error(401, "unauthorized: open /?token=TOKEN once in the browser (it sets a cookie), or send Authorization: Bearer TOKEN",
                                    headers: [("WWW-Authenticate", #"Bearer realm="gatt2mqtt""#)]))
        }
        // Another site's page must not drive the bridge through a browser that can reach it.
        if r.method != "GET", r.method != "HEAD", crossSite(r) {
            return .response(.error(403, "cross-site requests are refused"))
        }
        let path = r.path
        if path == "/metrics", let metrics {
            let m = metrics.response(to: Array("\(r.method) /metrics HTTP/1.1\r\n\r\n".utf8))
            return .response(HTTPResponse(status: m.status, headers: m.headers, body: m.body, omitBody: m.omitBody))
        }
        if let asset = FrontendPages.files[path == "/" ? "/index.html" : path] {
            guard r.method == "GET" || r.method == "HEAD" else { return .response(Self.notAllowed("GET, HEAD")) }
            var headers = [("Content-Type", asset.contentType)] + Self.pageHeaders
            if path == "/", token != nil, let t = r.query["token"], equal(t, token!) {
                // The token from the address bar becomes a cookie, and leaves the address bar.
                headers.append(("Set-Cookie", "\(Self.cookie)=\(t); Path=/; HttpOnly; SameSite=Strict"))
                return .response(HTTPResponse(status: 303, headers: [("Location", path), ("Set-Cookie", headers.last!.1), ("Cache-Control", "no-store")]))
            }
            return .response(HTTPResponse(status: 200, headers: headers, body: asset.body, omitBody: r.method == "HEAD"))
        }
        if path == "/api/events" {
            guard r.method == "GET" else { return .response(Self.notAllowed("GET")) }
            return .events(lastEventID: r.header("last-event-id"))
        }
        if path == "/api/state" {
            guard r.method == "GET" else { return .response(Self.notAllowed("GET")) }
            let items = hub.snapshot().map { String(decoding: event(json: $0), as: UTF8.self) }
            return .response(.json(200, #"{"boot":\#(jsonString(hub.boot)),"base":\#(jsonString(hub.topics.base)),"messages":[\#(items.joined(separator: ","))]}"#))
        }
        if path.hasPrefix("/api/request/") {
            guard r.method == "POST" else { return .response(Self.notAllowed("POST")) }
            return .response(await request(String(path.dropFirst("/api/request/".count)), r.body))
        }
        if path.hasPrefix("/api/devices/") {
            let parts = path.dropFirst("/api/devices/".count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            if parts.count == 2, parts[1] == "controls" {
                guard r.method == "GET" else { return .response(Self.notAllowed("GET")) }
                guard let controls = hub.controls(for: parts[0]) else { return .response(.error(404, "no device '\(parts[0])'")) }
                return .response(.json(200, controls.jsonText))
            }
            guard parts.count == 2 || (parts.count == 3 && parts[2] == "write") else {
                return .response(.error(404, "not found: expected /api/devices/<id>/set, /get or /<topic>/write"))
            }
            guard r.method == "POST" else { return .response(Self.notAllowed("POST")) }
            return .response(command(device: parts[0], parts.count == 3 ? .write(parts[1]) : parts[1] == "set" ? .set : parts[1] == "get" ? .get : nil, r.body))
        }
        return .response(.error(404, "not found: \(path)"))
    }

    static func notAllowed(_ allow: String) -> HTTPResponse { .error(405, "method not allowed (allowed: \(allow))", headers: [("Allow", allow)]) }

    func authorized(_ r: HTTPRequest) -> Bool {
        guard let token else { return true }
        if let a = r.header("authorization"), a.hasPrefix("Bearer "), equal(String(a.dropFirst(7)), token) { return true }
        if let c = r.cookies[Self.cookie], equal(c, token) { return true }
        // Only the page's address carries it (and the answer turns it into the cookie): in any
        // other address it would end up in logs and histories.
        if r.path == "/", r.method == "GET" || r.method == "HEAD", let q = r.query["token"], equal(q, token) { return true }
        return false
    }

    /// `Sec-Fetch-Site: cross-site` (or `same-site`), or an `Origin` that names a host this
    /// server does not answer to.
    func crossSite(_ r: HTTPRequest) -> Bool {
        if let site = r.header("sec-fetch-site"), site == "cross-site" || site == "same-site" { return true }
        if let origin = r.header("origin"), !hosts.allows(origin: origin) { return true }
        return false
    }

    /// Compares in time that does not depend on where they differ.
    func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = x.count ^ y.count
        for i in 0..<max(x.count, y.count) { diff |= Int((i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)) }
        return diff == 0
    }

    // MARK: Requests and commands: into the bridge as MQTT messages

    /// `bridge/request/<action>` with the body as its payload; the answer (`{"status":…}`) is
    /// the response body: 200 for `ok`, 400 for `error`.
    func request(_ action: String, _ body: [UInt8]) async -> HTTPResponse {
        guard !action.isEmpty, action.split(separator: "/", omittingEmptySubsequences: false).allSatisfy({ part in
            !part.isEmpty && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
        }) else {
            return .error(404, "not found: expected /api/request/<action>, e.g. /api/request/health_check")
        }
        // A device/add waits up to its `timeout` for the device (checked as the bridge checks it:
        // one it refuses is answered at once).
        var wait: Duration = .seconds(30)
        if let t = (try? JSONValue(parsing: body))?.objectValue?["timeout"]?.doubleValue,
           let d = try? checkedDuration(seconds: t, in: Bridge.addTimeouts) {
            wait = d + .seconds(15)
        }
        do {
            guard let reply = try await hub.request(action, payload: body, timeout: wait) else {
                return .error(504, "no answer from the bridge within \(secondsText(wait))")
            }
            let ok = (try? JSONValue(parsing: reply.payload))?.objectValue?["status"]?.stringValue == "ok"
            return .json(ok ? 200 : 400, reply.text)
        } catch {
            return .error(503, "the bridge is not running")
        }
    }

    enum CommandKind: Equatable {
        case set, get
        case write(String)
    }

    /// `<base>/<device>/set` (or `/get`, `/<topic>/write`) with the body. A JSON command without
    /// a `transaction` gets one (`web-…`), so the page can follow its lifecycle on
    /// `<device>/response`; the answer names it (202: the bridge has it).
    func command(device: String, _ kind: CommandKind?, _ body: [UInt8]) -> HTTPResponse {
        guard let kind else { return .error(404, "not found: expected /api/devices/<id>/set, /get or /<topic>/write") }
        guard Self.isName(device) else { return .error(400, "'\(device)' is not a device id") }
        guard knows(device) else { return .error(404, "no device '\(device)'") }
        let base = hub.topics.base
        var payload = body
        var transactions: [String] = []
        let topic: String
        switch kind {
        case .set, .get:
            topic = "\(base)/\(device)/\(kind == .set ? "set" : "get")"
            var value: JSONValue
            if kind == .get, body.allSatisfy({ $0 == 32 || $0 == 10 || $0 == 13 || $0 == 9 }) {
                value = .object([:])
            } else {
                do { value = try JSONValue(parsing: body) } catch { return .error(400, "invalid JSON: \(error)") }
            }
            func tagged(_ v: JSONValue) -> JSONValue {
                guard var o = v.objectValue else { return v }
                if o["transaction"] == nil { o["transaction"] = .string("web-" + UUID().uuidString.prefix(8).lowercased()) }
                if let t = o["transaction"] { transactions.append(t.stringValue ?? t.jsonText) }
                return .object(o)
            }
            switch value {
            case let .array(items) where kind == .set: value = .array(items.map(tagged))
            case .object: value = tagged(value)
            default: return .error(400, "expected a JSON object\(kind == .set ? " or an array of them" : "")")
            }
            payload = Array(value.jsonText.utf8)
        case let .write(characteristic):
            guard Self.isName(characteristic) else { return .error(400, "'\(characteristic)' is not a topic") }
            topic = "\(base)/\(device)/\(characteristic)/write"
        }
        do { try hub.inject(InboundMessage(topic: topic, payload: payload)) } catch { return .error(503, "the bridge is not running") }
        var o: JSONObject = ["topic": .string(topic), "transactions": .array(transactions.map { .string($0) })]
        if transactions.count == 1 { o["transaction"] = .string(transactions[0]) }
        return .json(202, JSONValue.object(o).jsonText)
    }

    static func isName(_ s: String) -> Bool {
        !s.isEmpty && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
    }

    /// Whether `bridge/devices` (as last published) lists the device.
    func knows(_ device: String) -> Bool {
        guard let list = hub.state.withLock({ $0.retained[hub.topics.bridgeDevices] }),
              let devices = (try? JSONValue(parsing: list.payload))?.arrayValue else { return true }
        return devices.contains { $0["id"]?.stringValue == device }
    }

    // MARK: Event framing

    func hello(reset: Bool) -> [UInt8] {
        SSE.event("hello", data: #"{"boot":\#(jsonString(hub.boot)),"base":\#(jsonString(hub.topics.base)),"reset":\#(reset)}"#)
    }

    /// One message as an SSE `message` event, its id `<boot>-<seq>`.
    func event(_ item: FrontendHub.Item) -> [UInt8] {
        SSE.event(id: "\(hub.boot)-\(item.seq)", data: String(decoding: event(json: item), as: UTF8.self))
    }

    /// `{"seq","topic","payload","retain"}`: the payload as JSON when it is JSON, else as a
    /// string; an empty one (a cleared retained topic) is null.
    func event(json item: FrontendHub.Item) -> [UInt8] {
        var out = Array(#"{"seq":\#(item.seq),"topic":\#(jsonString(item.topic)),"retain":\#(item.retain),"payload":"#.utf8)
        if item.payload.isEmpty {
            out += Array("null".utf8)
        } else if let v = try? JSONValue(parsing: item.payload) {
            out += Array(v.jsonText.utf8)
        } else {
            out += Array(jsonString(String(decoding: item.payload, as: UTF8.self)).utf8)
        }
        return out + [UInt8(ascii: "}")]
    }
}
