"""DDIO hit rates and DRAM traffic of ddio-l2fwd over packet sizes and ring sizes (docs/ddio.md).

Prints: packet bytes, RX descriptors, DMA write hit rate, DMA read hit rate, DRAM read and write GB/s.
Arguments are further KEY=VALUE settings applied to every point (e.g. platform.l3.clean_victims=false).
"""

import steer
from point_settings import settings_for_every_point

extra_settings = settings_for_every_point("ddio-l2fwd", __doc__.split("\n\n")[0])

for packet in (64, 512, 1024, 1500):
    for ring in (256, 1024, 4096):
        result = steer.run(
            "ddio-l2fwd",
            [f"packet_bytes={packet}", f"rx_ring={ring}", "sim.measure_us=1000", "sim.warmup_us=3000", *extra_settings],
        )
        nic = result["devices"]["nic0"]
        rates = (
            nic["dma_write_hit_rate"],
            nic["dma_read_hit_rate"],
            result["dram"]["read_gbps"],
            result["dram"]["write_gbps"],
        )
        print(packet, ring, *(f"{x:.3f}" for x in rates), flush=True)
