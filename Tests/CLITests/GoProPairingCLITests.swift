import Foundation
import TestSupport
import Testing

/// `gatt2mqtt gatt` against the simulated GoPro, whose characteristics need a paired link
/// (gopro.md §2): without `--pair` bluetoothd pairs on the first write (docs/bluez.md "Automatic
/// security"), with it the CLI pairs first; the bond is kept.
@Suite(.serialized, .timeLimit(.minutes(5))) struct GoProPairingCLITests {
    @Test func encryptedGoProPairsOnTheWayOrWithPairAndKeepsTheBond() async throws {
        let (sim, bus) = try await BluetoothCLITests.simulate(["--device", "gopro@C0:FF:EE:00:00:01"])
        defer {
            reap(sim)
        }
        // Keep-alive `5B 01 42` in one general-header packet, written to GP-0074.
        let args = ["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--write", "GP-0074", "035B0142", "--seconds", "5"]
        let unpaired = try await CLI.run(args)
        #expect(unpaired.status == 0, "\(unpaired.stderr)")
        #expect(unpaired.stdout == "ok\n")
        let paired = try await CLI.run(args + ["--pair"])  // already paired: --pair does nothing more
        #expect(paired.status == 0, "\(paired.stderr)")
        #expect(paired.stdout == "ok\n")
    }

    @Test func simulateRejectsBadPowerKnobs() async throws {
        let r = try await CLI.run(["simulate", "--gopro-sleep-after", "-1"])
        #expect(r.status != 0 && r.stderr.contains("--gopro-sleep-after"))
    }
}
