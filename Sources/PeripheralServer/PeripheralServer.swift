#if canImport(Glibc)
import Glibc
#endif
import BinaryCoding
import BlueZSimulator
import DeviceSimulators
import Reactor
import Synchronization

/// The simulated devices served to a radio front-end over a Unix stream socket, in
/// newline-delimited JSON (docs/bluez.md "The radio front-end protocol"; `gatt2mqtt peripherals`).
///
/// The front-end (`scripts/vm/radio.py`, Bumble) owns the radio: advertising, connections, ATT,
/// SMP. The models stay the only truth of how a device behaves: the front-end forwards every
/// read, write, subscription and link change here, and relays the models' notifications.
///
/// One front-end at a time (a second connection gets an `error` line and is closed). Everything
/// runs on `loop`: the socket's watches, the requests, the models' callbacks; state sits behind a
/// `Mutex` so models may also notify from other threads. A malformed line is answered with an
/// `error` line and the connection stays up.
public final class PeripheralServer: Sendable {
    /// The longest line accepted (a longer one is answered with an error and skipped).
    public static let maxLineLength = 1 << 20
    /// Output waiting for a front-end that does not read; beyond this the front-end is dropped.
    static let maxPendingOutput = 16 << 20

    public let socketPath: String
    let loop: EventLoop
    let entries: [Entry]
    let byAddress: [String: Entry]
    let state = Mutex(State())

    struct Entry: Sendable {
        let kind: String
        let device: any SimulatedDevice
        /// By full lowercase UUID.
        let characteristics: [String: SimulatedCharacteristic]
    }

    /// A model's link as the front-end reported it.
    struct Link {
        var epoch: UInt64
        /// Characteristics whose CCCD the central enabled.
        var subscribed: Set<String> = []
    }

    /// The connected front-end.
    struct Client {
        var id: Int
        var fd: Int32
        var watch: EventLoop.Watch
        var input: [UInt8] = []
        /// Skipping the rest of a line that was too long.
        var discarding = false
        var output: [UInt8] = []
    }

    struct State {
        var listenFD: Int32 = -1
        var listenWatch: EventLoop.Watch?
        var client: Client?
        var nextClientID = 0
        var links: [String: Link] = [:]
        /// address → characteristic → current value (initial, then the last read or notified).
        var values: [String: [String: [UInt8]]] = [:]
        var epoch: UInt64 = 0
        var stopped = false
    }

    /// - Parameters:
    ///   - peripherals: the devices to serve; a GoPro's sleep (gopro.md §9) becomes a
    ///     `disconnect` line to the front-end.
    ///   - socketPath: where to listen; a stale socket there is replaced.
    ///   - loop: where the socket is served and the models are called.
    public init(peripherals: [SimulatedPeripheral], socketPath: String, loop: EventLoop) throws(PeripheralServerError) {
        self.socketPath = socketPath
        self.loop = loop
        var entries: [Entry] = []
        var byAddress: [String: Entry] = [:]
        var values: [String: [String: [UInt8]]] = [:]
        for p in peripherals {
            let d = p.device
            let chars = d.services.flatMap(\.characteristics)
            let entry = Entry(kind: p.kind.rawValue, device: d,
                              characteristics: Dictionary(chars.map { ($0.uuid, $0) }, uniquingKeysWith: { a, _ in a }))
            guard byAddress[d.address] == nil else { throw .duplicateDevice(d.address) }
            entries.append(entry)
            byAddress[d.address] = entry
            values[d.address] = Dictionary(chars.map { ($0.uuid, $0.value) }, uniquingKeysWith: { a, _ in a })
        }
        self.entries = entries
        self.byAddress = byAddress
        state.withLock { $0.values = values }
        for p in peripherals {
            let address = p.device.address
            p.dropsLink(through: { [weak self] in self?.requestDisconnect(address) })
        }
    }

    // MARK: Listening

    /// Binds and listens on ``socketPath`` (mode 0600, replacing a stale socket) and starts
    /// accepting on the loop. Clients may connect once this returns.
    public func start() throws(PeripheralServerError) {
        let bytes = Array(socketPath.utf8)
        var address = sockaddr_un()
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .invalidPath(socketPath) }
        var info = stat()
        if lstat(socketPath, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else { throw .pathInUse(socketPath) }
            unlink(socketPath)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system("socket", errno) }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let mask = umask(0o077)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let bindErrno = errno
        umask(mask)
        guard bound == 0 else {
            close(fd)
            throw .system("bind \(socketPath)", bindErrno)
        }
        guard listen(fd, 4) == 0 else {
            let e = errno
            close(fd)
            unlink(socketPath)
            throw .system("listen", e)
        }
        let watch = loop.watch(fd, for: .readable) { [weak self] _ in self?.acceptClients() }
        state.withLock { s in
            s.listenFD = fd
            s.listenWatch = watch
        }
    }

    /// Stops listening, closes the front-end's connection (every link goes down, as when the
    /// front-end goes away) and removes the socket file.
    public func stop() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute { [self] in
                let (listenFD, watch) = state.withLock { s -> (Int32, EventLoop.Watch?) in
                    s.stopped = true
                    defer { s.listenFD = -1; s.listenWatch = nil }
                    return (s.listenFD, s.listenWatch)
                }
                watch?.cancel()
                if listenFD >= 0 {
                    close(listenFD)
                    unlink(socketPath)
                }
                dropClient()
                done.resume()
            }
        }
    }

    /// Whether a front-end is connected.
    public var hasClient: Bool { state.withLock { $0.client != nil } }

    func acceptClients() {
        while true {
            let listenFD = state.withLock { $0.listenFD }
            guard listenFD >= 0 else { return }
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else { return }  // EAGAIN: all accepted (other errors: try at the next readiness)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            let busy = state.withLock { $0.client != nil || $0.stopped }
            if busy {
                var line = Array(Self.line(.object(["op": "error", "message": "busy: another front-end is connected"])))
                _ = send(fd, &line, line.count, Int32(MSG_NOSIGNAL))
                close(fd)
                continue
            }
            let watch = loop.watch(fd, for: .readable) { [weak self] events in self?.clientReady(fd, events) }
            state.withLock { s in
                s.nextClientID += 1
                s.client = Client(id: s.nextClientID, fd: fd, watch: watch)
            }
        }
    }

    // MARK: The front-end's connection

    func clientReady(_ fd: Int32, _ events: EventLoop.IOEvents) {
        if events.contains(.writable) {
            let failed = state.withLock { s -> Bool in
                guard s.client?.fd == fd else { return false }
                return !Self.flush(&s)
            }
            if failed { return dropClient() }
        }
        guard events.contains(.readable) || events.contains(.hangup) else { return }
        var lines: [[UInt8]?] = []
        var ended = false
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                state.withLock { s in
                    guard s.client?.fd == fd else { return }
                    Self.split(chunk[0..<n], into: &s.client!, lines: &lines)
                }
                continue
            }
            if n < 0, errno == EINTR { continue }
            if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { ended = true }
            break
        }
        for line in lines {
            if let line { handle(line) } else { reply(nil, error: "line longer than \(Self.maxLineLength) bytes") }
        }
        if ended { dropClient() }
    }

    /// Appends `bytes` to the client's input and moves complete lines to `lines` (nil: a line
    /// longer than ``maxLineLength``, whose bytes are skipped up to its end).
    static func split(_ bytes: ArraySlice<UInt8>, into client: inout Client, lines: inout [[UInt8]?]) {
        var rest = bytes
        while let nl = rest.firstIndex(of: UInt8(ascii: "\n")) {
            if client.discarding {
                client.discarding = false
            } else {
                let line = client.input + rest[rest.startIndex..<nl]
                lines.append(line.count > maxLineLength ? nil : line)
            }
            client.input.removeAll(keepingCapacity: true)
            rest = rest[(nl + 1)...]
        }
        guard !client.discarding else { return }
        client.input.append(contentsOf: rest)
        if client.input.count > maxLineLength {
            client.input.removeAll()
            client.discarding = true
            lines.append(nil)
        }
    }

    /// Closes the front-end's connection; every link it reported goes down (the models see
    /// `linkChanged(nil)`).
    func dropClient() {
        let (client, down) = state.withLock { s -> (Client?, [String]) in
            guard let c = s.client else { return (nil, []) }
            s.client = nil
            let down = Array(s.links.keys)
            s.links = [:]
            return (c, down)
        }
        guard let client else { return }
        client.watch.cancel()
        loop.execute { close(client.fd) }
        for address in down { byAddress[address]?.device.linkChanged(nil) }
    }

    // MARK: Output

    /// One JSON line.
    static func line(_ value: JSONValue) -> [UInt8] { Array((value.jsonText + "\n").utf8) }

    /// Queues `value` for the front-end and writes what the socket takes; false when there is
    /// no front-end.
    @discardableResult
    func emit(_ value: JSONValue) -> Bool {
        let (sent, failed) = state.withLock { s -> (Bool, Bool) in
            Self.emit(value, &s)
        }
        if failed { dropClient() }
        return sent
    }

    /// Under the lock: (queued, the connection failed).
    static func emit(_ value: JSONValue, _ s: inout State) -> (Bool, Bool) {
        guard s.client != nil else { return (false, false) }
        s.client!.output += line(value)
        if s.client!.output.count > maxPendingOutput { return (false, true) }
        return (true, !flush(&s))
    }

    /// Writes pending output without blocking and asks for writability while some is left;
    /// false when the connection failed.
    static func flush(_ s: inout State) -> Bool {
        guard var c = s.client else { return true }
        defer { s.client = c }
        while !c.output.isEmpty {
            let n = c.output.withUnsafeBytes { send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                c.output.removeFirst(n)
                continue
            }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { break }
            return false
        }
        c.watch.setEvents(c.output.isEmpty ? .readable : [.readable, .writable])
        return true
    }

    // MARK: From the models

    /// A model notified on a link: sent when the link is the current one and the front-end said
    /// the characteristic is subscribed (what `SimulatedLink.notify` returns). The value becomes
    /// the characteristic's current one while the link is current.
    func deviceNotified(_ address: String, epoch: UInt64, uuid: String, value: [UInt8]) -> Bool {
        let (sent, failed) = state.withLock { s -> (Bool, Bool) in
            guard let link = s.links[address], link.epoch == epoch else { return (false, false) }
            if s.values[address]?[uuid] != nil { s.values[address]![uuid] = value }
            guard link.subscribed.contains(uuid) else { return (false, false) }
            return Self.emit(.object(["op": "notify", "address": .string(address), "uuid": .string(uuid),
                                      "value": .string(Hex.encode(value))]), &s)
        }
        if failed { dropClient() }
        return sent
    }

    /// A model's advertisement changed (an advertiser stepped, ``SimulatedPeripheral/advertising(_:every:clock:changed:)``):
    /// the front-end gets `{"op":"advertise","address","advertisement":{…}}` to put on the air;
    /// false when no front-end is connected or the address is not served.
    @discardableResult
    public func advertisementChanged(_ address: String) -> Bool {
        guard let entry = byAddress[address.uppercased()] else { return false }
        return emit(.object(["op": "advertise", "address": .string(entry.device.address),
                             "advertisement": PeripheralDescription.advertisement(entry.device.advertisement)]))
    }

    /// A model wants its link dropped (a GoPro falling asleep): the front-end is asked to
    /// disconnect; the link goes down when it reports it.
    func requestDisconnect(_ address: String) {
        let (_, failed) = state.withLock { s -> (Bool, Bool) in
            guard s.links[address] != nil else { return (false, false) }
            return Self.emit(.object(["op": "disconnect", "address": .string(address)]), &s)
        }
        if failed { dropClient() }
    }
}
