import DBus

extension BlueZSimulator {
    /// An agent registered with `AgentManager1`: the client's unique bus name and the object path.
    public struct Agent: Sendable, Equatable {
        public let owner: String
        public let path: DBusObjectPath
        public init(owner: String, path: DBusObjectPath) {
            self.owner = owner
            self.path = path
        }
    }

    /// What an incoming pairing request (``incomingPairing(_:adapter:)``) came to.
    public enum IncomingPairing: Sendable, Equatable {
        /// The default agent said yes: the device is `Paired` and `Bonded` on that adapter.
        case accepted
        /// The default agent answered this D-Bus error (e.g. `org.bluez.Error.Rejected`).
        case rejected(String)
        /// No default agent: refused without asking anyone (bluetoothd 5.66 `new_auth`:
        /// "No agent available for request type").
        case noAgent
    }

    /// The agent the client `owner` registered, if any.
    public func agent(of owner: String) -> DBusObjectPath? {
        state.withLock { $0.agents[owner] }
    }

    /// The `AgentManager1` methods the client `owner` called, in order.
    public func agentManagerCalls(from owner: String) -> [String] {
        state.withLock { $0.agentManagerCalls.filter { $0.0 == owner }.map(\.1) }
    }

    /// The default agent: the head of bluetoothd's default-agent queue (the first agent
    /// registered, unless another asked `RequestDefaultAgent` since).
    public var defaultAgent: Agent? {
        state.withLock { s -> Agent? in
            for owner in s.defaultAgents {
                if let path = s.agents[owner] { return Agent(owner: owner, path: path) }
            }
            return nil
        }
    }

    /// The agent that answers the requests of a `Pair` called by `sender`: the caller's own
    /// agent, default or not, else the default agent (bluetoothd 5.66 `pair_device` →
    /// `agent_get(sender)`).
    func pairingAgent(for sender: String?) -> Agent? {
        if let sender, let path = agent(of: sender) { return Agent(owner: sender, path: path) }
        return defaultAgent
    }

    /// Asks `agent` `RequestAuthorization(device)`; nil when it said yes, else the error name
    /// it answered (a timeout or a vanished agent counts as `org.bluez.Error.Canceled`).
    func askAuthorization(_ agent: Agent, device: DBusObjectPath) async -> String? {
        do {
            _ = try await connection.call(destination: agent.owner, path: agent.path, interface: "org.bluez.Agent1",
                                          method: "RequestAuthorization", arguments: [.objectPath(device)],
                                          timeout: .seconds(30))
            return nil
        } catch {
            if case let .remote(name, _) = error { return name }
            return "org.bluez.Error.Canceled"
        }
    }

    /// A pairing request the device `address` starts from its side towards an adapter (nil: the
    /// first), as a nearby central would: it goes to the default agent — never to an agent that
    /// is only some client's own — as `RequestAuthorization` (Just Works; bluetoothd 5.66
    /// `device_confirm_passkey` with no `Pair` in flight). With no default agent it is refused.
    /// The device must be one the emulator knows; its object is exported if it was not (bluetoothd
    /// makes one for a device that connects).
    public func incomingPairing(_ address: String, adapter: String? = nil) async throws(BlueZSimulatorError) -> IncomingPairing {
        let key = try key(address, adapter: adapter)
        try wrap { () throws(DBusError) in try exportDevice(key, withRSSI: false) }
        guard let path = state.withLock({ $0.devices[key]?.path }) else { throw .unknownDevice(address) }
        state.withLock { $0.record(key.address, Received(method: "IncomingPairing", value: [], delivered: true, sender: nil)) }
        guard let agent = defaultAgent else { return .noAgent }
        if let refused = await askAuthorization(agent, device: path) { return .rejected(refused) }
        state.withLock { $0.devices[key]?.paired = true }
        try? connection.setProperties(path, interface: Self.device1, ["Paired": .boolean(true), "Bonded": .boolean(true)])
        return .accepted
    }
}
