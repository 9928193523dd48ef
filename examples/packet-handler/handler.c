/* A small UDP packet handler, traced by trace.sh to compare DMA placements with steer
 * (docs/your-code.md). For each packet it parses the Ethernet, IPv4 and UDP headers, looks the
 * flow up in an open-addressing hash table (inserting it on first sight), counts packets and
 * bytes, and sums the payload. main() makes the packets itself, writing each into the receive
 * buffer as a NIC would, then calls handle_packet on it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PACKETS 64
#define FLOWS 16
#define PACKET_BYTES 1500
#define TABLE_ENTRIES 1024 /* 64 KiB of flow state */

struct flow {
    uint32_t src, dst;
    uint16_t sport, dport;
    uint8_t proto, used;
    uint64_t packets, bytes, payload_sum;
    uint8_t pad[24]; /* one 64 B line per flow */
};

/* The receive buffer and the program's state: the regions regions.toml names. */
uint8_t rx_buffer[2048] __attribute__((aligned(64)));
struct flow flow_table[TABLE_ENTRIES] __attribute__((aligned(64)));
uint64_t dropped;

static uint32_t load32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
static uint16_t load16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static uint32_t flow_hash(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport) {
    uint32_t h = src * 0x9e3779b1u ^ dst;
    h = (h ^ ((uint32_t)sport << 16 | dport)) * 0x85ebca6bu;
    return h ^ h >> 15;
}

__attribute__((noinline)) void handle_packet(const uint8_t *frame, uint32_t len) {
    if (len < 42 || load16(frame + 12) != 0x0800) { dropped++; return; }
    const uint8_t *ip = frame + 14;
    uint32_t ihl = (ip[0] & 0x0f) * 4;
    if ((ip[0] >> 4) != 4 || ip[9] != 17 || 14 + ihl + 8 > len) { dropped++; return; }
    uint32_t src = load32(ip + 12), dst = load32(ip + 16);
    const uint8_t *udp = ip + ihl;
    uint16_t sport = load16(udp), dport = load16(udp + 2);
    uint32_t slot = flow_hash(src, dst, sport, dport) % TABLE_ENTRIES;
    struct flow *f = &flow_table[slot];
    while (f->used && !(f->src == src && f->dst == dst && f->sport == sport && f->dport == dport)) {
        slot = (slot + 1) % TABLE_ENTRIES;
        f = &flow_table[slot];
    }
    if (!f->used) {
        f->used = 1; f->src = src; f->dst = dst; f->sport = sport; f->dport = dport; f->proto = 17;
    }
    f->packets++;
    f->bytes += len;
    const uint8_t *payload = udp + 8;
    uint64_t sum = 0;
    for (uint32_t i = 0; i + 8 <= len - (uint32_t)(payload - frame); i += 8) {
        uint64_t word;
        memcpy(&word, payload + i, 8);
        sum += word;
    }
    f->payload_sum += sum;
}

/* Packet `n` of flow n % FLOWS, written into the receive buffer as the NIC would. */
static uint32_t make_packet(uint32_t n) {
    uint8_t *p = rx_buffer;
    uint32_t flow = n % FLOWS;
    memset(p, 0, 12);
    p[12] = 0x08; p[13] = 0x00;
    uint8_t *ip = p + 14;
    ip[0] = 0x45; ip[9] = 17;
    uint32_t src = 0x0a000001 + flow, dst = 0x0a000101;
    for (int i = 0; i < 4; i++) { ip[12 + i] = src >> (24 - 8 * i); ip[16 + i] = dst >> (24 - 8 * i); }
    uint8_t *udp = ip + 20;
    udp[0] = 0x30; udp[1] = (uint8_t)flow; udp[2] = 0x12; udp[3] = 0x34;
    for (uint32_t i = 42; i < PACKET_BYTES; i++) p[i] = (uint8_t)(i + n);
    return PACKET_BYTES;
}

int main(void) {
    for (uint32_t n = 0; n < PACKETS; n++) handle_packet(rx_buffer, make_packet(n));
    uint64_t total = 0;
    for (int i = 0; i < TABLE_ENTRIES; i++) total += flow_table[i].packets;
    printf("%llu packets, %llu dropped\n", (unsigned long long)total, (unsigned long long)dropped);
    return total == PACKETS ? 0 : 1;
}
