"""bleak (an independent BlueZ client, PyPI) drives a simulated GoPro on the bus in
DBUS_SYSTEM_BUS_ADDRESS: find it by address, connect, subscribe to GP-0073, write the
shutter-on command (gopro.md §4: TLV 01 01 01, one packet 03 01 01 01) to GP-0072 and wait for
the camera's answer (02 01 00: command 0x01, status 0). No pair() call: the characteristics are
encrypted, and bluetoothd pairs Just Works on the first access by itself (docs/bluez.md
"Automatic security").

Prints one line per step, "<step> <detail>", so the Swift test that runs it can tell where it
stopped. Every wait has a deadline. Exit status: 0 done, 2 device not found, 3 no answer in time,
1 any other failure (with the exception on stderr).

    python3 bleak_gopro.py C0:FF:EE:00:00:07 [--find-timeout SECONDS] [--find-only]
"""

import argparse
import asyncio
import sys

from bleak import BleakClient, BleakScanner

GP_0072 = "b5f90072-aa8d-11e3-9046-0002a5d5c51b"  # command request
GP_0073 = "b5f90073-aa8d-11e3-9046-0002a5d5c51b"  # command response
SHUTTER_ON = bytes([0x03, 0x01, 0x01, 0x01])


def step(name: str, detail: str = "") -> None:
    print(f"{name} {detail}".rstrip(), flush=True)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--find-timeout", type=float, default=10.0)
    parser.add_argument("--answer-timeout", type=float, default=10.0)
    parser.add_argument("--find-only", action="store_true")
    args = parser.parse_args()

    device = await BleakScanner.find_device_by_address(args.address, timeout=args.find_timeout)
    if device is None:
        step("not-found", args.address)
        return 2
    step("found", f"{device.address} {device.name}")
    if args.find_only:
        return 0

    answers: asyncio.Queue[bytes] = asyncio.Queue()
    async with BleakClient(device, timeout=args.find_timeout) as client:
        step("connected", str(client.is_connected))
        await client.start_notify(GP_0073, lambda _, data: answers.put_nowait(bytes(data)))
        step("subscribed", GP_0073)
        await client.write_gatt_char(GP_0072, SHUTTER_ON, response=True)
        step("written", SHUTTER_ON.hex())
        try:
            answer = await asyncio.wait_for(answers.get(), timeout=args.answer_timeout)
        except asyncio.TimeoutError:
            step("no-answer")
            return 3
        step("answer", answer.hex())
        await client.stop_notify(GP_0073)
    step("disconnected")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
