import Foundation
import TestSupport
import Testing

/// `gatt2mqtt gatt` against the simulated GoPro, whose characteristics need a paired link
/// (gopro.md §2): refused with a hint without `--pair`, fine with it, and the bond is kept.
@Suite(.serialized, .timeLimit(.minutes(1))) struct GoProPairingCLITests {
    @Test func encryptedGoProNeedsPairAndKeepsTheBond() async throws {
        let (sim, bus) = try await BluetoothCLITests.simulate(["--device", "gopro@C0:FF:EE:00:00:01"])
        defer {
            reap(sim)
        }
        // Keep-alive `5B 01 42` in one general-header packet, written to GP-0074.
        let args = ["gatt", "--bus", bus, "--device", "C0:FF:EE:00:00:01", "--write", "GP-0074", "035B0142", "--seconds", "5"]
        let refused = try await CLI.run(args)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("Insufficient authentication") && refused.stderr.contains("--pair"))
        let paired = try await CLI.run(args + ["--pair"])
        #expect(paired.status == 0)
        #expect(paired.stdout == "ok\n")
        let again = try await CLI.run(args)  // bonded now: no --pair needed
        #expect(again.status == 0)
        #expect(again.stdout == "ok\n")
    }

    @Test func simulateRejectsBadPowerKnobs() async throws {
        let r = try await CLI.run(["simulate", "--gopro-sleep-after", "-1"])
        #expect(r.status != 0 && r.stderr.contains("--gopro-sleep-after"))
    }
}
