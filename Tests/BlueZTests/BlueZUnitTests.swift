import BlueZ
import DBus
import Testing

/// Pure parts of the client: UUID forms, error mapping, read-echo filtering.
@Suite struct BlueZUnitTests {
    @Test func uuidForms() {
        #expect(BluetoothUUID("2A37")?.uuidString == "00002a37-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID("0x180f")?.uuidString == "0000180f-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID("0000FEA6")?.uuidString == "0000fea6-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID("GP-0072")?.uuidString == "b5f90072-aa8d-11e3-9046-0002a5d5c51b")
        #expect(BluetoothUUID("gp-00a1")?.uuidString == "b5f900a1-aa8d-11e3-9046-0002a5d5c51b")
        #expect(BluetoothUUID("B5F90072AA8D11E390460002A5D5C51B")?.uuidString == "b5f90072-aa8d-11e3-9046-0002a5d5c51b")
        #expect(BluetoothUUID(" 12345678-1234-5678-1234-56789ABCDEF0 ")?.uuidString == "12345678-1234-5678-1234-56789abcdef0")
        for bad in ["", "2A3", "GP-72", "GP-00X2", "xyz", "12345678-1234-5678-1234-56789abcdef", "1234567-81234-5678-1234-56789abcdef0"] {
            #expect(BluetoothUUID(bad) == nil, "\(bad)")
        }
    }

    @Test func errorMapping() {
        func map(_ name: String, _ message: String) -> BlueZError { BlueZError(.remote(name: name, message: message)) }
        #expect(map("org.bluez.Error.Failed", "Not connected").code == "not_connected")
        #expect(map("org.bluez.Error.NotConnected", "Not Connected").code == "not_connected")
        #expect(map("org.bluez.Error.Failed", "Operation already in progress").code == "in_progress")
        #expect(map("org.bluez.Error.InProgress", "In Progress").code == "in_progress")
        #expect(map("org.bluez.Error.Failed", "Operation failed with ATT error: 0x80") == .att(0x80))
        #expect(map("org.bluez.Error.Failed", "Operation failed with ATT error: 0x0e") == .att(0x0E))
        #expect(map("org.bluez.Error.NotPermitted", "Read not permitted") == .notPermitted("Read not permitted"))
        #expect(map("org.bluez.Error.Failed", "le-connection-abort-by-local").code == "connection_failed")
        #expect(map("org.bluez.Error.Failed", "Software caused connection abort").code == "connection_failed")
        #expect(map("org.bluez.Error.Failed", "br-connection-canceled").code == "cancelled")
        #expect(map("org.bluez.Error.NotReady", "Resource Not Ready").code == "not_ready")
        #expect(map("org.bluez.Error.DoesNotExist", "Does Not Exist").code == "does_not_exist")
        #expect(map("org.freedesktop.DBus.Error.ServiceUnknown", "no org.bluez").code == "unavailable")
        #expect(map("org.bluez.Error.Failed", "Operation failed") == .failed(name: "org.bluez.Error.Failed", message: "Operation failed"))
        #expect(map("org.bluez.Error.Whatever", "x") == .failed(name: "org.bluez.Error.Whatever", message: "x"))
        #expect(BlueZError(.timeout(method: "ReadValue", milliseconds: 5)).code == "timeout")
        #expect(BlueZError(.disconnected) == .bus(.disconnected))
    }

    @Test func echoAfterReplyIsDropped() {
        var f = ReadEchoFilter()
        #expect(f.signal([1]) == [[1]])  // a plain notification
        f.beginRead()
        #expect(f.endRead([5]).isEmpty)
        #expect(f.signal([5]).isEmpty)  // the echo, arriving after the reply
        #expect(f.signal([5]) == [[5]])  // a later identical notification is delivered
    }

    @Test func echoBeforeReplyIsDroppedAndOthersReleasedInOrder() {
        var f = ReadEchoFilter()
        f.beginRead()
        #expect(f.signal([9]).isEmpty)  // a notification during the read: held
        #expect(f.signal([5]).isEmpty)  // the echo
        #expect(f.signal([7]).isEmpty)
        #expect(f.endRead([5]) == [[9], [7]])
        #expect(f.signal([5]) == [[5]])
    }

    @Test func failedReadReleasesEverything() {
        var f = ReadEchoFilter()
        f.beginRead()
        f.beginRead()
        #expect(f.signal([1]).isEmpty)
        #expect(f.endRead(nil).isEmpty)  // one read still in flight
        #expect(f.endRead([2]) == [[1]])
        #expect(f.signal([2]).isEmpty)
    }
}
