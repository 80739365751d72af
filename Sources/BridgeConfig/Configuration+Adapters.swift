extension Configuration {
    /// Device address → adapter name, for the devices whose `adapter` key pins them to one
    /// (issue 14 §1). A pin is by address: a device found by `name_pattern` alone has none
    /// (``pinsWithoutAddress``).
    public var adapterPins: [String: String] {
        var pins: [String: String] = [:]
        for d in devices {
            if let adapter = d.adapter, let address = d.address { pins[address] = adapter }
        }
        return pins
    }

    /// The ids of devices with an `adapter` but no `address`, whose pin cannot apply.
    public var pinsWithoutAddress: [String] {
        devices.filter { $0.adapter != nil && $0.address == nil }.map(\.id)
    }
}
