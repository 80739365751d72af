import BinaryCoding
import BlueZSimulator

/// The front-end's requests (docs/bluez.md "The radio front-end protocol"). Each runs on the
/// loop, in the order received; the models are called without the server's lock held (they may
/// notify from inside a write).
extension PeripheralServer {
    /// A request that cannot be carried out: answered `{"op":"error","message":…}`.
    struct RequestError: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    func handle(_ line: [UInt8]) {
        let request: JSONObject
        do {
            guard let object = try JSONValue(parsing: line).objectValue else {
                return reply(nil, error: "a request is a JSON object")
            }
            request = object
        } catch {
            return reply(nil, error: "\(error)")
        }
        var id: JSONValue?
        if let given = request["id"] {
            guard given.int64Value != nil else { return reply(nil, error: "id must be an integer") }
            id = given
        }
        do {
            guard let op = request["op"]?.stringValue else { throw RequestError("missing op") }
            switch op {
            case "hello":
                reply(id, ["op": "devices", "protocol": 1,
                           "devices": .array(entries.map { PeripheralDescription.json(kind: $0.kind, $0.device) })],
                      always: true)
            case "link": try link(request, id: id)
            case "subscribe": try subscribe(request, id: id)
            case "write": try write(request, id: id)
            case "read": try read(request, id: id)
            default: throw RequestError("unknown op \(op.debugDescription)")
            }
        } catch let error as RequestError {
            reply(id, error: error.message)
        } catch {
            reply(id, error: "\(error)")
        }
    }

    /// `{"op":"link","address","up"}`: the model's `linkChanged` with a new link or nil. A link
    /// reported up again replaces the old one (the model sees nil first).
    func link(_ request: JSONObject, id: JSONValue?) throws {
        let entry = try device(request)
        guard let up = request["up"]?.boolValue else { throw RequestError("up must be true or false") }
        let address = entry.device.address
        let (wasUp, epoch) = state.withLock { s -> (Bool, UInt64) in
            let wasUp = s.links.removeValue(forKey: address) != nil
            guard up else { return (wasUp, 0) }
            s.epoch += 1
            s.links[address] = Link(epoch: s.epoch)
            return (wasUp, s.epoch)
        }
        if wasUp { entry.device.linkChanged(nil) }
        if up {
            entry.device.linkChanged(SimulatedLink { [weak self] uuid, value in
                self?.deviceNotified(address, epoch: epoch, uuid: uuid, value: value) ?? false
            })
        }
        reply(id, ["op": "result"])
    }

    /// `{"op":"subscribe","address","uuid","on"}`: the central wrote the characteristic's CCCD.
    func subscribe(_ request: JSONObject, id: JSONValue?) throws {
        let entry = try device(request)
        let c = try characteristic(request, of: entry)
        guard let on = request["on"]?.boolValue else { throw RequestError("on must be true or false") }
        guard c.flags.contains(where: { $0.hasSuffix("notify") || $0.hasSuffix("indicate") }) else {
            throw RequestError("\(c.uuid) of \(entry.device.address) neither notifies nor indicates")
        }
        try state.withLock { s in
            guard s.links[entry.device.address] != nil else { throw RequestError("\(entry.device.address) has no link") }
            if on { s.links[entry.device.address]!.subscribed.insert(c.uuid) } else { s.links[entry.device.address]!.subscribed.remove(c.uuid) }
        }
        reply(id, ["op": "result"])
    }

    /// `{"op":"write","address","uuid","value","response"}`: a write request (`response`
    /// true, the default) or command reached the device. A request the characteristic's flags do
    /// not allow gets ATT error 0x03; a command to a characteristic without
    /// write-without-response is dropped, as a device does (spec/bluez.md behaviour 7).
    func write(_ request: JSONObject, id: JSONValue?) throws {
        let entry = try device(request)
        let c = try characteristic(request, of: entry)
        let value = try bytes(request["value"], "value")
        let response = request["response"]?.boolValue ?? true
        guard request["response"] == nil || request["response"]?.boolValue != nil else {
            throw RequestError("response must be true or false")
        }
        try requireLink(entry)
        if response {
            guard c.flags.contains(where: { $0 == "write" || $0.hasSuffix("-write") }) else {
                return reply(id, ["op": "result", "att_error": .int(Int64(SimulatedATTError.writeNotPermitted.code))])
            }
        } else if !c.flags.contains("write-without-response") {
            return reply(id, ["op": "result", "dropped": true])
        }
        do {
            try entry.device.handleWrite(value, to: c.uuid, withResponse: response)
            reply(id, ["op": "result"])
        } catch {
            reply(id, ["op": "result", "att_error": .int(Int64(error.code))])
        }
    }

    /// `{"op":"read","address","uuid"}` → `{"op":"result","value"}`: the model's answer, which
    /// becomes the current value.
    func read(_ request: JSONObject, id: JSONValue?) throws {
        let entry = try device(request)
        let c = try characteristic(request, of: entry)
        try requireLink(entry)
        guard c.flags.contains(where: { $0 == "read" || $0.hasSuffix("-read") }) else {
            return reply(id, ["op": "result", "att_error": .int(Int64(SimulatedATTError.readNotPermitted.code))], always: true)
        }
        let address = entry.device.address
        let current = state.withLock { $0.values[address]?[c.uuid] ?? c.value }
        do {
            let value = try entry.device.handleRead(c.uuid, current: current)
            state.withLock { $0.values[address]?[c.uuid] = value }
            reply(id, ["op": "result", "value": .string(Hex.encode(value))], always: true)
        } catch {
            reply(id, ["op": "result", "att_error": .int(Int64(error.code))], always: true)
        }
    }

    // MARK: Arguments

    func device(_ request: JSONObject) throws -> Entry {
        guard let address = request["address"]?.stringValue else { throw RequestError("missing address") }
        guard let entry = byAddress[address.uppercased()] else { throw RequestError("no device \(address)") }
        return entry
    }

    func characteristic(_ request: JSONObject, of entry: Entry) throws -> SimulatedCharacteristic {
        guard let uuid = request["uuid"]?.stringValue else { throw RequestError("missing uuid") }
        guard let c = entry.characteristics[SimUUID.full(uuid)] else {
            throw RequestError("\(entry.device.address) has no characteristic \(uuid)")
        }
        return c
    }

    func bytes(_ value: JSONValue?, _ name: String) throws -> [UInt8] {
        guard let text = value?.stringValue else { throw RequestError("\(name) must be a hex string") }
        do { return try Hex.decode(text) } catch { throw RequestError("\(name): \(error)") }
    }

    func requireLink(_ entry: Entry) throws {
        let up = state.withLock { $0.links[entry.device.address] != nil }
        guard up else { throw RequestError("\(entry.device.address) has no link") }
    }

    // MARK: Answers

    /// Answers a request: with its `id` when it has one; without one only when `always` (hello,
    /// read).
    func reply(_ id: JSONValue?, _ answer: JSONObject, always: Bool = false) {
        guard id != nil || always else { return }
        emit(.object(Self.withID(id, answer)))
    }

    /// `answer` with `id` right after `op`.
    static func withID(_ id: JSONValue?, _ answer: JSONObject) -> JSONObject {
        guard let id else { return answer }
        return JSONObject(Array(answer.members.prefix(1)) + [(key: "id", value: id)] + answer.members.dropFirst())
    }

    /// `{"op":"error","message"}` (with the request's `id` when it had one): always sent.
    func reply(_ id: JSONValue?, error message: String) {
        emit(.object(Self.withID(id, ["op": "error", "message": .string(message)])))
    }
}
