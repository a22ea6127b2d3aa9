/*
 * The C half of psp's DPDK dataplane: EAL start-up, port set-up and the
 * per-burst packet path (ARP, IPv4/UDP classification, in-place replies).
 *
 * Go calls one function per burst. Every array exchanged with Go lives in C
 * memory; mbuf pointers cross the boundary as uintptr_t.
 */
#ifndef PSP_DPDK_H
#define PSP_DPDK_H

#include <stddef.h>
#include <stdint.h>

/* Why the receive path dropped a packet. Keep in step with dropReasons in Go. */
enum psp_drop {
	PSP_DROP_RUNT = 0,      /* shorter than the headers it announces */
	PSP_DROP_UNSUPPORTED,   /* multi-segment or foreign-pool mbuf */
	PSP_DROP_OTHER_MAC,     /* unicast frame for another MAC address */
	PSP_DROP_NOT_IPV4,      /* neither IPv4 nor ARP (IPv6, VLAN, LLDP...) */
	PSP_DROP_ARP_IGNORED,   /* ARP other than a request for our address */
	PSP_DROP_BAD_IPV4,      /* bad version, header length, total length or checksum */
	PSP_DROP_FRAGMENT,      /* IPv4 fragment */
	PSP_DROP_OTHER_IP,      /* IPv4 for another address */
	PSP_DROP_NOT_UDP,       /* IPv4 but not UDP */
	PSP_DROP_BAD_UDP,       /* bad UDP length or checksum */
	PSP_DROP_OTHER_PORT,    /* UDP to a port the dataplane does not serve */
	PSP_DROP_REASONS
};

/* Counters, each written by one thread and read with relaxed atomics. */
enum psp_counter {
	PSP_CTR_RX_POLLED = PSP_DROP_REASONS, /* packets taken from the device */
	PSP_CTR_RX_DELIVERED,                 /* UDP requests handed to Go */
	PSP_CTR_ARP_REPLIES,                  /* ARP replies transmitted */
	PSP_CTR_ARP_TX_ERRORS,                /* ARP replies the device refused */
	PSP_CTR_RAW_TX,                       /* frames sent by psp_tx_raw */
	PSP_COUNTERS
};

/* One received UDP request. */
struct psp_rx_desc {
	uintptr_t mbuf;
	uint8_t *payload;  /* first byte of the UDP payload */
	uint32_t index;    /* the mbuf's slot in the pool */
	uint16_t len;      /* UDP payload length */
	uint16_t room;     /* bytes writable from payload on (bounded by the MTU) */
	uint8_t peer_ip[4];
	uint16_t peer_port;
	uint16_t dst_port;
};

/* One reply to build in place in its request's mbuf and transmit. */
struct psp_tx_desc {
	uintptr_t mbuf;
	uint8_t peer_ip[4];
	uint16_t peer_port;
	uint16_t src_port;
	uint16_t len;      /* UDP payload length; PSP_TX_DROP: free, do not send */
	uint16_t pad;
};

#define PSP_TX_DROP 0xffff

struct psp_port_conf {
	uint16_t port_id;
	uint16_t workers;
	/* out: worker TX queues 0..worker_queues-1 (workers share them when the
	 * device has fewer than one each); queue worker_queues is the net
	 * worker's. */
	uint16_t worker_queues;
	uint16_t burst;
	uint16_t rx_desc;
	uint16_t tx_desc;
	uint32_t pool_size; /* 0: computed */
	uint8_t ip[4];
	char pool_name[32];
	struct psp_port *port; /* out: the opened port */
};

struct psp_port;

int psp_eal_init(int argc, char **argv, char *err, size_t errlen);

/* psp_port_open returns 0 and sets conf->port, or a negative errno. */
int psp_port_open(struct psp_port_conf *conf, char *err, size_t errlen);
void psp_port_serve_udp(struct psp_port *p, uint16_t udp_port);
/* psp_port_stop drains, stops and closes the device; the pool stays. */
void psp_port_stop(struct psp_port *p);
/* psp_port_free frees the pool and the port's memory. */
void psp_port_free(struct psp_port *p);

struct psp_rx_desc *psp_port_rx_descs(struct psp_port *p);
struct psp_tx_desc *psp_port_tx_descs(struct psp_port *p, uint16_t queue);
uintptr_t *psp_port_scratch(struct psp_port *p);
uint32_t psp_port_pool_size(const struct psp_port *p);
uint32_t psp_port_reserved(const struct psp_port *p);
uint16_t psp_port_mtu(const struct psp_port *p);
uint16_t psp_port_rx_queues(const struct psp_port *p);
/* The port's MAC address, byte i in bits 8*i..8*i+7. */
uint64_t psp_port_mac(const struct psp_port *p);
uint64_t psp_port_counter(const struct psp_port *p, int which);
uint32_t psp_pool_in_use(const struct psp_port *p);
/* Packets the device itself dropped: missed, errors, no mbuf. */
uint64_t psp_port_device_drops(const struct psp_port *p);
uint64_t psp_port_rx_nombuf(const struct psp_port *p);
int psp_port_id(const struct psp_port *p);

uint16_t psp_rx(struct psp_port *p, uint16_t max);
uint16_t psp_tx(struct psp_port *p, uint16_t queue, uint16_t n);
void psp_free_scratch(struct psp_port *p, uint16_t n);
/* psp_alloc_reply allocates an mbuf for a further reply datagram to the
 * request in mbuf req: it copies req's Ethernet, IPv4 and UDP headers (so
 * psp_tx turns it into a reply like req) and fills d (len 0). It returns 0,
 * or -ENOBUFS when the pool is empty. */
int psp_alloc_reply(struct psp_port *p, uintptr_t req, struct psp_rx_desc *d);
int psp_tx_raw(struct psp_port *p, const uint8_t *frame, uint16_t len);
/* Sends payload as a UDP datagram from the port's MAC, IP and udp_port to
 * themselves. */
int psp_tx_self(struct psp_port *p, const uint8_t *payload, uint16_t len,
		uint16_t udp_port);

/* Hot-plugging virtual devices. */
/* psp_vdev_add returns the new device's port id, or a negative errno. */
int psp_vdev_add(const char *name, const char *args, char *err, size_t errlen);
int psp_vdev_remove(const char *name);

/* EAL resources in use: memzones and bytes allocated from the heaps. */
void psp_eal_usage(uint64_t *memzones, uint64_t *heap_bytes);

/* A port over two rings (tests and benchmarks): frames enqueued on the rx
 * ring are received, frames the port transmits land on the tx ring. */
struct psp_ring_pair;
struct psp_ring_pair *psp_ring_pair_create(const char *name, uint16_t tx_queues,
					   char *err, size_t errlen);
uint16_t psp_ring_pair_port(const struct psp_ring_pair *rp);
void psp_ring_pair_free(struct psp_ring_pair *rp);
int psp_ring_pair_inject(struct psp_ring_pair *rp, struct psp_port *p,
			 const uint8_t *frame, uint16_t len);
int psp_ring_pair_collect(struct psp_ring_pair *rp, uint8_t *buf, uint16_t cap);
unsigned psp_ring_pair_reflect(struct psp_ring_pair *rp, unsigned max);
unsigned psp_ring_pair_drain(struct psp_ring_pair *rp);

#endif
