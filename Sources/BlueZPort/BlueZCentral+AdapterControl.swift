import BlueZ
import BridgeCore
import DBus

/// The adapter's management side for the bridge's requests (BridgeCore `BLEAdapterControl`:
/// scan, pair, unpair/forget), over the same client and discovery as the links.
extension BlueZCentral: BLEAdapterControl {
    /// Discovery on the adapter (LE, DuplicateData, no filter), shared with `connect`'s look-ups
    /// (``SharedDiscovery``): a connect to a device BlueZ does not know yet while this runs waits
    /// for the device in it, and `stop` during such a look-up narrows the discovery to the
    /// looked-up address instead of ending it. Each sighting (a new device, or a `Device1` change
    /// of RSSI, name, UUIDs, manufacturer or service data) is one ``Advertisement``.
    public func scan() async throws(BLEError) -> BLEScan {
        do throws(BlueZError) {
            return try await discovery.scan()
        } catch {
            throw BLEError(error)
        }
    }

    /// Pairs with `address` (Just Works, through the pairing agent, spec/bluez.md behaviour 9).
    /// A device BlueZ does not know is looked up first, as `connect` does; `Device1.Pair`
    /// connects it when needed (bluez doc/org.bluez.Device.rst) and the link is left to BlueZ.
    /// Already paired (as cached, or `AlreadyExists` from BlueZ) is success. Returns once the
    /// cache shows `Paired`.
    public func pair(address: String, timeout: Duration) async throws(BLEError) {
        let start = ContinuousClock.now
        func left() -> Duration { max(.milliseconds(1), timeout - (ContinuousClock.now - start)) }
        do throws(BlueZError) {
            let device = try await discovery.lookUp(address, timeout: left())
            if client.isPaired(device) { return }
            await ensureAgent()
            do {
                try await client.pair(device, timeout: left())
            } catch {
                guard case .alreadyExists = error else { throw error }
                return
            }
            let path = device.path
            // bluetoothd sets Paired before it answers Pair; the signal may reach the cache just after.
            _ = try await client.waitFor("Paired on \(device.address)", timeout: left()) { objs in
                let props = objs[path]?[BlueZClient.device1]
                return props?["Paired"]?.boolValue == true || props?["Bonded"]?.boolValue == true ? true : nil
            }
        } catch {
            throw BLEError(error)
        }
    }

    /// Whether BlueZ shows `address` connected on this adapter. The bridge asks only about a
    /// device none of its sessions has a link to, so any link there is not this central's.
    public func holdsUnusedLink(to address: String) -> Bool {
        guard let device = client.device(address, adapter: adapter) else { return false }
        return client.connectionState(device).connected
    }

    /// `Device1.Disconnect` of the device on this adapter, waiting for `Connected=false`
    /// (about 2 s on bluetoothd, spec/bluez.md behaviour 5). Not connected is success.
    public func closeUnusedLink(to address: String) async throws(BLEError) {
        guard let device = client.device(address, adapter: adapter) else { return }
        do throws(BlueZError) { try await disconnectIfConnected(device) } catch { throw BLEError(error) }
    }

    /// The same on the daemon's other adapters (not this one, nor `keeping`); a failure leaves
    /// that link and goes on with the next.
    public func takeOver(address: String, keeping adapters: Set<String>) async -> [String] {
        var closed: [String] = []
        for (device, name) in elsewhere(address, keeping: adapters) where (try? await disconnectIfConnected(device)) == true {
            closed.append(name)
        }
        return closed
    }

    /// Whether the cache shows `address` connected on another adapter of this daemon (not this
    /// one, nor `keeping`).
    public func linkedThroughAnotherAdapter(_ address: String, keeping adapters: Set<String>) -> Bool {
        elsewhere(address, keeping: adapters).contains { client.connectionState($0.device).connected }
    }

    /// The cached objects of `address` under the daemon's other adapters (not this one, nor
    /// `keeping`), with their adapter's name.
    func elsewhere(_ address: String, keeping adapters: Set<String>) -> [(device: BlueZDevice, adapter: String)] {
        let keep = adapters.union([adapter.name])
        return client.devices(address).compactMap { device in
            guard let parent = device.path.parent else { return nil }
            let name = BlueZAdapter(path: parent).name
            return keep.contains(name) ? nil : (device, name)
        }
    }

    /// `Device1.Disconnect` when the cache shows the device connected; true when it was.
    @discardableResult
    func disconnectIfConnected(_ device: BlueZDevice) async throws(BlueZError) -> Bool {
        guard client.connectionState(device).connected else { return false }
        try await client.disconnect(device, timeout: client.callTimeout)
        return true
    }

    /// `Adapter1.RemoveDevice`: bluetoothd disconnects the device if needed, forgets its bond and
    /// removes its object. A device BlueZ does not know (or no longer knows) is success. Returns
    /// once the cache no longer has it.
    public func forget(address: String) async throws(BLEError) {
        guard let device = client.device(address, adapter: adapter) else { return }
        do throws(BlueZError) {
            do {
                try await client.remove(device)
            } catch {
                guard case .doesNotExist = error else { throw error }
                return
            }
            let path = device.path
            _ = try await client.waitFor("\(device.address) removed", timeout: client.callTimeout) { objs in
                objs[path]?[BlueZClient.device1] == nil ? true : nil
            }
        } catch {
            throw BLEError(error)
        }
    }
}
