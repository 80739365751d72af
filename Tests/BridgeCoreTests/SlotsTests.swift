import Testing
import TestSupport

/// The gate of the process-heavy end-to-end tests (`Slots`): several slots are taken at once, and
/// first come is first served.
@Suite struct SlotsTests {
    private actor Order {
        var names: [String] = []
        func append(_ name: String) { names.append(name) }
    }

    /// Tests that need both slots each run one after the other; taking them one at a time,
    /// two could each hold one and wait for ever for the other.
    @Test(.timeLimit(.minutes(1))) func testsTakingBothSlotsRunOneAfterTheOther() async {
        let slots = Slots(2)
        let ran = await withTaskGroup(of: Int.self) { group in
            for i in 0..<4 {
                group.addTask {
                    await slots.acquire(2)
                    await Task.yield()
                    slots.release(2)
                    return i
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(ran.sorted() == [0, 1, 2, 3])
    }

    /// A test that needs two slots is not passed over by one that came later needing one.
    @Test(.timeLimit(.minutes(1))) func firstComeFirstServed() async {
        let slots = Slots(2)
        let order = Order()
        await slots.acquire()  // one of two held
        let two = Task {
            await slots.acquire(2)
            await order.append("two")
            slots.release(2)
        }
        #expect(await eventually { slots.waiting == 1 })
        let one = Task {
            await slots.acquire()
            await order.append("one")
            slots.release()
        }
        #expect(await eventually { slots.waiting == 2 }, "one slot is free, but the earlier waiter needs two")
        slots.release()
        await two.value
        await one.value
        #expect(await order.names == ["two", "one"])
    }
}
