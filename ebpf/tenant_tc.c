// auditmesh tenant classifier: a TC program (clsact, direct-action) compiled and loaded by bcc.
//
// For each packet it finds the QoS class, in this order:
//   1. the TCP destination port, then the source port, in `port_class` (a tenant's dedicated port, or
//      a server port whose replies belong to one class);
//   2. the DSCP value in `dscp_class` (the router opens one gRPC channel per class with grpc.dscp);
//   3. the connection, in `flow_class`: a connection whose packets in one direction were classified
//      by DSCP is remembered, so its packets in the other direction (the answers) get the same class.
// On egress it sets skb->priority to the class's full HTB handle (e.g. 0x10010 for 1:10), which HTB
// reads before running any filter. It counts packets and bytes per class and direction, and per port
// rule, in per-CPU maps. It never drops or rewrites a packet: anything it cannot parse passes as is.
//
// The loader defines PIN_DIR (a bpffs folder) and MAX_CLASSES. Maps are pinned there so that
// `status`, `update` and `detach` in later processes find them; slot 0 of every class index means
// "no class", slot i+1 is the i-th QoS class of the tenants file.

#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/ipv6.h>
#include <uapi/linux/pkt_cls.h>
#include <uapi/linux/tcp.h>

#define DIR_EGRESS 0
#define DIR_INGRESS 1
#define SLOTS (MAX_CLASSES + 1)
#define ETH_P_8021Q_BE 0x0081  // htons(ETH_P_8021Q): one VLAN tag is skipped
#define IP_FRAGMENT_MASK 0xff3f  // htons(IP_MF | IP_OFFSET): any fragment has no usable L4 header

struct counter {
    u64 packets;
    u64 bytes;
};

struct port_key {
    u16 port;
    u8 direction;
    u8 pad;
};

// One TCP connection as seen from this host: the same key in both directions.
struct flow_key {
    u8 local_addr[16];   // IPv4 addresses use the first 4 bytes
    u8 remote_addr[16];
    u16 local_port;
    u16 remote_port;
    u8 family;
    u8 pad[3];
};

struct packet {
    u32 dscp;
    u16 sport;       // host byte order; 0 when not TCP
    u16 dport;
    u8 has_ports;
    struct flow_key flow_out;  // local = source (valid on egress)
    struct flow_key flow_in;   // local = destination (valid on ingress)
};

BPF_TABLE_PINNED("array", u32, u32, dscp_class, 64, PIN_DIR "/dscp_class");
BPF_TABLE_PINNED("hash", u16, u32, port_class, 1024, PIN_DIR "/port_class");
BPF_TABLE_PINNED("array", u32, u32, class_handle, SLOTS, PIN_DIR "/class_handle");
BPF_TABLE_PINNED("lru_hash", struct flow_key, u32, flow_class, 65536, PIN_DIR "/flow_class");
BPF_TABLE_PINNED("percpu_array", u32, struct counter, class_stats, 2 * SLOTS, PIN_DIR "/class_stats");
BPF_TABLE_PINNED("percpu_hash", struct port_key, struct counter, port_stats, 2048, PIN_DIR "/port_stats");

static __always_inline void copy_addr4(u8 *to, __be32 addr) {
    __builtin_memcpy(to, &addr, 4);
}

static __always_inline int parse_ipv4(void *data, void *end, u32 offset, struct packet *pkt) {
    struct iphdr *ip = data + offset;
    if ((void *)(ip + 1) > end)
        return -1;
    u32 header_len = ip->ihl * 4;
    if (header_len < sizeof(*ip))
        return -1;
    pkt->dscp = ip->tos >> 2;
    pkt->flow_out.family = pkt->flow_in.family = 4;
    copy_addr4(pkt->flow_out.local_addr, ip->saddr);
    copy_addr4(pkt->flow_out.remote_addr, ip->daddr);
    copy_addr4(pkt->flow_in.local_addr, ip->daddr);
    copy_addr4(pkt->flow_in.remote_addr, ip->saddr);
    if (ip->protocol != IPPROTO_TCP || (ip->frag_off & IP_FRAGMENT_MASK))
        return 0;
    return offset + header_len;
}

static __always_inline int parse_ipv6(void *data, void *end, u32 offset, struct packet *pkt) {
    struct ipv6hdr *ip6 = data + offset;
    if ((void *)(ip6 + 1) > end)
        return -1;
    pkt->dscp = (ip6->priority << 2) | (ip6->flow_lbl[0] >> 6);
    pkt->flow_out.family = pkt->flow_in.family = 6;
    __builtin_memcpy(pkt->flow_out.local_addr, &ip6->saddr, 16);
    __builtin_memcpy(pkt->flow_out.remote_addr, &ip6->daddr, 16);
    __builtin_memcpy(pkt->flow_in.local_addr, &ip6->daddr, 16);
    __builtin_memcpy(pkt->flow_in.remote_addr, &ip6->saddr, 16);
    if (ip6->nexthdr != IPPROTO_TCP)  // extension headers are not walked: classified by DSCP only
        return 0;
    return offset + sizeof(*ip6);
}

// Fills `pkt`; returns -1 for a packet that is not (well-formed) IPv4/IPv6.
static __always_inline int parse(struct __sk_buff *skb, struct packet *pkt) {
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return -1;
    u32 offset = sizeof(*eth);
    u16 proto = eth->h_proto;
    if (proto == ETH_P_8021Q_BE) {
        __be16 *inner = data + offset + 2;
        if ((void *)(inner + 1) > end)
            return -1;
        proto = *inner;
        offset += 4;
    }
    int l4;
    if (proto == htons(ETH_P_IP))
        l4 = parse_ipv4(data, end, offset, pkt);
    else if (proto == htons(ETH_P_IPV6))
        l4 = parse_ipv6(data, end, offset, pkt);
    else
        return -1;
    if (l4 <= 0)
        return l4;
    if (l4 > 14 + 4 + 60)  // bounds the offset for the verifier (an IPv4 header is at most 60 bytes)
        return 0;
    struct tcphdr *tcp = data + l4;
    if ((void *)(tcp + 1) > end)
        return 0;  // truncated TCP header: classify by DSCP only
    pkt->sport = ntohs(tcp->source);
    pkt->dport = ntohs(tcp->dest);
    pkt->has_ports = 1;
    pkt->flow_out.local_port = pkt->flow_in.remote_port = pkt->sport;
    pkt->flow_out.remote_port = pkt->flow_in.local_port = pkt->dport;
    return 0;
}

static __always_inline void add(struct counter *counter, struct __sk_buff *skb) {
    if (!counter)
        return;
    // wire_len is the length HTB accounts (GSO headers included); gso_segs the packets it counts.
    u32 segments = skb->gso_segs;
    counter->packets += segments ? segments : 1;
    counter->bytes += skb->wire_len;
}

static __always_inline void count_port(u16 port, u32 direction, struct __sk_buff *skb) {
    struct port_key key = {.port = port, .direction = direction};
    struct counter *counter = port_stats.lookup(&key);
    if (!counter) {
        struct counter zero = {};
        port_stats.update(&key, &zero);
        counter = port_stats.lookup(&key);
    }
    add(counter, skb);
}

static __always_inline u32 classify(struct packet *pkt, u32 direction, struct __sk_buff *skb) {
    u32 *slot;
    if (pkt->has_ports) {
        u16 port = pkt->dport;
        slot = port_class.lookup(&port);
        if (!slot) {
            port = pkt->sport;
            slot = port_class.lookup(&port);
        }
        if (slot) {
            count_port(port, direction, skb);
            return *slot;
        }
    }
    u32 dscp = pkt->dscp & 63;
    slot = dscp_class.lookup(&dscp);
    struct flow_key *flow = direction == DIR_EGRESS ? &pkt->flow_out : &pkt->flow_in;
    if (slot && *slot) {
        if (pkt->has_ports) {
            u32 *known = flow_class.lookup(flow);
            if (!known || *known != *slot) {
                u32 value = *slot;
                flow_class.update(flow, &value);
            }
        }
        return *slot;
    }
    if (!pkt->has_ports)
        return 0;
    slot = flow_class.lookup(flow);
    return slot ? *slot : 0;
}

static __always_inline int handle(struct __sk_buff *skb, u32 direction) {
    struct packet pkt = {};
    u32 slot = 0;
    if (parse(skb, &pkt) == 0)
        slot = classify(&pkt, direction, skb);
    if (slot >= SLOTS)
        slot = 0;
    if (slot && direction == DIR_EGRESS) {
        u32 *handle = class_handle.lookup(&slot);
        if (handle && *handle)
            skb->priority = *handle;
    }
    u32 index = direction * SLOTS + slot;
    add(class_stats.lookup(&index), skb);
    return TC_ACT_OK;
}

int tc_egress(struct __sk_buff *skb) {
    return handle(skb, DIR_EGRESS);
}

int tc_ingress(struct __sk_buff *skb) {
    return handle(skb, DIR_INGRESS);
}
