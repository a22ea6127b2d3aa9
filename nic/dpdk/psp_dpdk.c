//go:build linux && cgo && dpdk

#include "psp_dpdk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_branch_prediction.h>
#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memzone.h>
#include <rte_memcpy.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_udp.h>

#define PSP_TX_RETRIES 4

struct psp_txq {
	struct psp_tx_desc *descs;  /* filled by Go */
	struct rte_mbuf **pkts;
};

struct psp_port {
	uint16_t port_id;
	uint16_t nb_rxq;
	uint16_t nb_txq;
	uint16_t ctl_txq;
	uint16_t burst;
	uint16_t mtu;
	uint16_t next_rxq;
	uint32_t ip;                /* network order, as in the header */
	struct rte_ether_addr mac;
	struct rte_mempool *pool;
	uint32_t pool_size;
	uint32_t reserved;          /* buffers the device rings and bursts may hold */
	uint64_t udp_ports[65536 / 64];

	struct rte_mbuf **rx_pkts;
	struct rte_mbuf **drop_pkts;
	struct rte_mbuf **arp_pkts;
	struct psp_rx_desc *rx_descs;
	uintptr_t *scratch;         /* Release: filled by Go under a lock */
	struct psp_txq *txqs;

	uint64_t ctr[PSP_COUNTERS];
};

static void
psp_errf(char *err, size_t errlen, const char *fmt, int code)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, fmt, rte_strerror(code < 0 ? -code : code));
}

int
psp_eal_init(int argc, char **argv, char *err, size_t errlen)
{
	int ret = rte_eal_init(argc, argv);
	if (ret < 0) {
		psp_errf(err, errlen, "%s", rte_errno);
		return -1;
	}
	return 0;
}

static inline void
psp_count(struct psp_port *p, int which, uint64_t n)
{
	/* Single writer per counter: a relaxed load/store pair is enough. */
	uint64_t v = __atomic_load_n(&p->ctr[which], __ATOMIC_RELAXED);
	__atomic_store_n(&p->ctr[which], v + n, __ATOMIC_RELAXED);
}

uint64_t
psp_port_counter(const struct psp_port *p, int which)
{
	if (which < 0 || which >= PSP_COUNTERS)
		return 0;
	return __atomic_load_n(&p->ctr[which], __ATOMIC_RELAXED);
}

static void
psp_set_index(struct rte_mempool *mp, void *opaque, void *obj, unsigned idx)
{
	(void)mp;
	(void)opaque;
	*(uint32_t *)rte_mbuf_to_priv((struct rte_mbuf *)obj) = idx;
}

static void *
psp_calloc(size_t n, size_t size)
{
	return calloc(n == 0 ? 1 : n, size);
}

static void
psp_port_release_memory(struct psp_port *p)
{
	if (p->txqs != NULL) {
		for (uint16_t q = 0; q < p->nb_txq; q++) {
			free(p->txqs[q].descs);
			free(p->txqs[q].pkts);
		}
	}
	free(p->txqs);
	free(p->rx_pkts);
	free(p->drop_pkts);
	free(p->arp_pkts);
	free(p->rx_descs);
	free(p->scratch);
	free(p);
}

int
psp_port_open(struct psp_port_conf *conf, char *err, size_t errlen)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf eth_conf;
	uint16_t port = conf->port_id;
	uint16_t worker_queues = conf->workers;
	uint16_t nb_txq, nb_rxq = 1;
	uint16_t rxd = conf->rx_desc, txd = conf->tx_desc;
	int ret;

	conf->port = NULL;
	conf->worker_queues = 0;
	if (!rte_eth_dev_is_valid_port(port)) {
		snprintf(err, errlen, "no port %u (%u ports available)", port,
			 rte_eth_dev_count_avail());
		return -ENODEV;
	}
	ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0) {
		psp_errf(err, errlen, "device info: %s", ret);
		return ret;
	}
	if (info.max_tx_queues < 2) {
		snprintf(err, errlen,
			 "device %s has %u tx queue(s), psp needs 2 (workers and net worker)",
			 info.driver_name, info.max_tx_queues);
		return -EINVAL;
	}
	/* Workers share TX queues when the device has fewer than one each. */
	if (worker_queues > info.max_tx_queues - 1)
		worker_queues = info.max_tx_queues - 1;
	/*
	 * Virtual devices that pair rx queue i with tx queue i (net_ring
	 * loops tx queue i back to rx queue i, net_tap's kernel side spreads
	 * flows over its queues) get as many rx queues as tx queues, and the
	 * net worker polls them all. Real NICs get one rx queue.
	 *
	 * net_tap passes one file descriptor per rx and per tx queue in a
	 * single IPC message limited to RTE_MP_MAX_FD_NUM (8) descriptors, and
	 * DPDK 22.11 overflows its stack beyond that: at most 4 queue pairs.
	 */
	int paired = strcmp(info.driver_name, "net_ring") == 0 ||
		     strcmp(info.driver_name, "net_tap") == 0;
	if (strcmp(info.driver_name, "net_tap") == 0 &&
	    worker_queues > RTE_MP_MAX_FD_NUM / 2 - 1)
		worker_queues = RTE_MP_MAX_FD_NUM / 2 - 1;
	if (paired && worker_queues > info.max_rx_queues - 1)
		worker_queues = info.max_rx_queues > 1 ? info.max_rx_queues - 1 : worker_queues;
	nb_txq = worker_queues + 1;
	if (paired)
		nb_rxq = RTE_MIN(nb_txq, info.max_rx_queues);
	conf->worker_queues = worker_queues;

	struct psp_port *p = psp_calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->port_id = port;
	p->nb_rxq = nb_rxq;
	p->nb_txq = nb_txq;
	p->ctl_txq = worker_queues;
	p->burst = conf->burst;
	memcpy(&p->ip, conf->ip, 4);
	p->rx_pkts = psp_calloc(conf->burst, sizeof(*p->rx_pkts));
	p->drop_pkts = psp_calloc(conf->burst, sizeof(*p->drop_pkts));
	p->arp_pkts = psp_calloc(conf->burst, sizeof(*p->arp_pkts));
	p->rx_descs = psp_calloc(conf->burst, sizeof(*p->rx_descs));
	p->scratch = psp_calloc(conf->burst, sizeof(*p->scratch));
	p->txqs = psp_calloc(nb_txq, sizeof(*p->txqs));
	if (p->rx_pkts == NULL || p->drop_pkts == NULL || p->arp_pkts == NULL ||
	    p->rx_descs == NULL || p->scratch == NULL || p->txqs == NULL) {
		psp_port_release_memory(p);
		return -ENOMEM;
	}
	for (uint16_t q = 0; q < nb_txq; q++) {
		p->txqs[q].descs = psp_calloc(conf->burst, sizeof(struct psp_tx_desc));
		p->txqs[q].pkts = psp_calloc(conf->burst, sizeof(struct rte_mbuf *));
		if (p->txqs[q].descs == NULL || p->txqs[q].pkts == NULL) {
			psp_port_release_memory(p);
			return -ENOMEM;
		}
	}

	memset(&eth_conf, 0, sizeof(eth_conf));
	ret = rte_eth_dev_configure(port, nb_rxq, nb_txq, &eth_conf);
	if (ret != 0) {
		psp_errf(err, errlen, "configure: %s", ret);
		psp_port_release_memory(p);
		return ret;
	}
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
	if (ret != 0) {
		psp_errf(err, errlen, "adjust descriptors: %s", ret);
		psp_port_release_memory(p);
		return ret;
	}

	uint32_t need = (uint32_t)nb_rxq * rxd + (uint32_t)nb_txq * txd +
			(uint32_t)(nb_txq + 2) * conf->burst;
	uint32_t n = conf->pool_size;
	if (n == 0) {
		n = 8191;
		while (n < need)
			n = n * 2 + 1;
	} else if (n < need) {
		snprintf(err, errlen,
			 "pool of %u buffers is too small: %u rx queues x %u + %u tx queues x %u descriptors + bursts need %u",
			 n, nb_rxq, rxd, nb_txq, txd, need);
		psp_port_release_memory(p);
		return -EINVAL;
	}
	int socket = rte_eth_dev_socket_id(port);
	if (socket < 0)
		socket = SOCKET_ID_ANY;
	p->pool = rte_pktmbuf_pool_create(conf->pool_name, n, 0,
					  RTE_MBUF_PRIV_ALIGN,
					  RTE_MBUF_DEFAULT_BUF_SIZE, socket);
	if (p->pool == NULL) {
		psp_errf(err, errlen, "mempool: %s", rte_errno);
		ret = -rte_errno;
		psp_port_release_memory(p);
		return ret;
	}
	p->pool_size = n;
	p->reserved = need;
	rte_mempool_obj_iter(p->pool, psp_set_index, NULL);

	for (uint16_t q = 0; q < nb_rxq; q++) {
		ret = rte_eth_rx_queue_setup(port, q, rxd, socket, NULL, p->pool);
		if (ret != 0) {
			psp_errf(err, errlen, "rx queue setup: %s", ret);
			goto fail;
		}
	}
	for (uint16_t q = 0; q < nb_txq; q++) {
		ret = rte_eth_tx_queue_setup(port, q, txd, socket, NULL);
		if (ret != 0) {
			psp_errf(err, errlen, "tx queue setup: %s", ret);
			goto fail;
		}
	}
	ret = rte_eth_dev_start(port);
	if (ret != 0) {
		psp_errf(err, errlen, "start: %s", ret);
		goto fail;
	}
	rte_eth_macaddr_get(port, &p->mac);
	if (rte_eth_dev_get_mtu(port, &p->mtu) != 0 || p->mtu < 576)
		p->mtu = RTE_ETHER_MTU;
	conf->port = p;
	return 0;

fail:
	rte_eth_dev_close(port);
	rte_mempool_free(p->pool);
	psp_port_release_memory(p);
	return ret;
}

void
psp_port_serve_udp(struct psp_port *p, uint16_t udp_port)
{
	p->udp_ports[udp_port >> 6] |= UINT64_C(1) << (udp_port & 63);
}

void
psp_port_stop(struct psp_port *p)
{
	/* Take back what the device still holds so the pool can be freed. */
	for (int round = 0; round < 64; round++) {
		unsigned got = 0;
		for (uint16_t q = 0; q < p->nb_rxq; q++) {
			uint16_t n = rte_eth_rx_burst(p->port_id, q, p->rx_pkts,
						      p->burst);
			rte_pktmbuf_free_bulk(p->rx_pkts, n);
			got += n;
		}
		if (got == 0)
			break;
	}
	rte_eth_dev_stop(p->port_id);
	rte_eth_dev_close(p->port_id);
}

void
psp_port_free(struct psp_port *p)
{
	rte_mempool_free(p->pool);
	psp_port_release_memory(p);
}

struct psp_rx_desc *psp_port_rx_descs(struct psp_port *p) { return p->rx_descs; }
struct psp_tx_desc *psp_port_tx_descs(struct psp_port *p, uint16_t q) { return p->txqs[q].descs; }
uintptr_t *psp_port_scratch(struct psp_port *p) { return p->scratch; }
uint32_t psp_port_pool_size(const struct psp_port *p) { return p->pool_size; }
uint32_t psp_port_reserved(const struct psp_port *p) { return p->reserved; }
uint16_t psp_port_mtu(const struct psp_port *p) { return p->mtu; }
uint16_t psp_port_rx_queues(const struct psp_port *p) { return p->nb_rxq; }
int psp_port_id(const struct psp_port *p) { return p->port_id; }
uint64_t
psp_port_mac(const struct psp_port *p)
{
	uint64_t v = 0;
	for (int i = 0; i < RTE_ETHER_ADDR_LEN; i++)
		v |= (uint64_t)p->mac.addr_bytes[i] << (8 * i);
	return v;
}
uint32_t psp_pool_in_use(const struct psp_port *p) { return rte_mempool_in_use_count(p->pool); }

uint64_t
psp_port_device_drops(const struct psp_port *p)
{
	struct rte_eth_stats st;
	if (rte_eth_stats_get(p->port_id, &st) != 0)
		return 0;
	return st.imissed + st.ierrors + st.rx_nombuf;
}

uint64_t
psp_port_rx_nombuf(const struct psp_port *p)
{
	struct rte_eth_stats st;
	if (rte_eth_stats_get(p->port_id, &st) != 0)
		return 0;
	return st.rx_nombuf;
}

/* The one's-complement sum (not complemented) of the UDP pseudo-header and
 * datagram, in memory byte order. */
static inline uint16_t
psp_udp_sum(const struct rte_ipv4_hdr *ip, const void *udp, uint16_t udp_len)
{
	uint32_t sum = rte_raw_cksum(&ip->src_addr, 8);
	sum += rte_cpu_to_be_16(IPPROTO_UDP);
	sum += rte_cpu_to_be_16(udp_len);
	sum += rte_raw_cksum(udp, udp_len);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

enum { PSP_ACCEPT = -1, PSP_ARP_REPLY = -2 };

static inline int
psp_arp(struct psp_port *p, struct rte_mbuf *m, struct rte_ether_hdr *eth)
{
	if (rte_pktmbuf_data_len(m) < sizeof(*eth) + sizeof(struct rte_arp_hdr))
		return PSP_DROP_RUNT;
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != 4 ||
	    arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST) ||
	    arp->arp_data.arp_tip != p->ip)
		return PSP_DROP_ARP_IGNORED;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	arp->arp_data.arp_tha = arp->arp_data.arp_sha;
	arp->arp_data.arp_tip = arp->arp_data.arp_sip;
	arp->arp_data.arp_sha = p->mac;
	arp->arp_data.arp_sip = p->ip;
	eth->dst_addr = arp->arp_data.arp_tha;
	eth->src_addr = p->mac;
	m->ol_flags = 0;
	return PSP_ARP_REPLY;
}

static inline int
psp_classify(struct psp_port *p, struct rte_mbuf *m, struct psp_rx_desc *d)
{
	uint32_t data_len = rte_pktmbuf_data_len(m);

	if (unlikely(m->nb_segs != 1 || m->pool != p->pool))
		return PSP_DROP_UNSUPPORTED;
	if (unlikely(data_len < sizeof(struct rte_ether_hdr)))
		return PSP_DROP_RUNT;
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	if (rte_is_unicast_ether_addr(&eth->dst_addr) &&
	    !rte_is_same_ether_addr(&eth->dst_addr, &p->mac))
		return PSP_DROP_OTHER_MAC;
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
		return psp_arp(p, m, eth);
	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return PSP_DROP_NOT_IPV4;

	uint32_t l3_room = data_len - sizeof(*eth);
	if (unlikely(l3_room < sizeof(struct rte_ipv4_hdr)))
		return PSP_DROP_RUNT;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint32_t ihl = (uint32_t)(ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4;
	uint32_t total = rte_be_to_cpu_16(ip->total_length);
	if (unlikely((ip->version_ihl >> 4) != 4 || ihl < sizeof(*ip) ||
		     total < ihl || total > l3_room))
		return total > l3_room ? PSP_DROP_RUNT : PSP_DROP_BAD_IPV4;
	uint64_t ipck = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
	if (unlikely(ipck == RTE_MBUF_F_RX_IP_CKSUM_BAD))
		return PSP_DROP_BAD_IPV4;
	if (ipck != RTE_MBUF_F_RX_IP_CKSUM_GOOD && rte_raw_cksum(ip, ihl) != 0xffff)
		return PSP_DROP_BAD_IPV4;
	if (unlikely(ip->fragment_offset &
		     rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)))
		return PSP_DROP_FRAGMENT;
	if (ip->dst_addr != p->ip)
		return PSP_DROP_OTHER_IP;
	if (ip->next_proto_id != IPPROTO_UDP)
		return PSP_DROP_NOT_UDP;
	if (unlikely(total < ihl + sizeof(struct rte_udp_hdr)))
		return PSP_DROP_RUNT;

	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)((uint8_t *)ip + ihl);
	uint32_t udp_len = rte_be_to_cpu_16(udp->dgram_len);
	if (unlikely(udp_len < sizeof(*udp) || udp_len > total - ihl))
		return PSP_DROP_BAD_UDP;
	uint16_t dport = rte_be_to_cpu_16(udp->dst_port);
	if (!((p->udp_ports[dport >> 6] >> (dport & 63)) & 1))
		return PSP_DROP_OTHER_PORT;
	if (udp->dgram_cksum != 0) {
		uint64_t l4ck = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
		if (unlikely(l4ck == RTE_MBUF_F_RX_L4_CKSUM_BAD))
			return PSP_DROP_BAD_UDP;
		if (l4ck != RTE_MBUF_F_RX_L4_CKSUM_GOOD &&
		    psp_udp_sum(ip, udp, (uint16_t)udp_len) != 0xffff)
			return PSP_DROP_BAD_UDP;
	}

	uint8_t *payload = (uint8_t *)(udp + 1);
	uint8_t *end = (uint8_t *)m->buf_addr + m->buf_len;
	uint32_t room = (uint32_t)(end - payload);
	uint32_t mtu_room = p->mtu - ihl - sizeof(*udp);
	if (room > mtu_room)
		room = mtu_room;
	d->mbuf = (uintptr_t)m;
	d->payload = payload;
	d->index = *(uint32_t *)rte_mbuf_to_priv(m);
	d->len = (uint16_t)(udp_len - sizeof(*udp));
	d->room = (uint16_t)room;
	memcpy(d->peer_ip, &ip->src_addr, 4);
	d->peer_port = rte_be_to_cpu_16(udp->src_port);
	d->dst_port = dport;
	return PSP_ACCEPT;
}

uint16_t
psp_rx(struct psp_port *p, uint16_t max)
{
	uint16_t nb = 0, got = 0, ndrop = 0, narp = 0;
	uint64_t drops[PSP_DROP_REASONS] = {0};
	int any_drop = 0;

	if (max > p->burst)
		max = p->burst;
	for (uint16_t i = 0; i < p->nb_rxq && nb < max; i++) {
		uint16_t q = p->next_rxq;
		p->next_rxq = (uint16_t)(q + 1 == p->nb_rxq ? 0 : q + 1);
		nb += rte_eth_rx_burst(p->port_id, q, p->rx_pkts + nb, max - nb);
	}
	if (nb == 0)
		return 0;
	for (uint16_t i = 0; i < nb; i++) {
		struct rte_mbuf *m = p->rx_pkts[i];
		if (i + 1 < nb)
			rte_prefetch0(rte_pktmbuf_mtod(p->rx_pkts[i + 1], void *));
		int r = psp_classify(p, m, &p->rx_descs[got]);
		if (likely(r == PSP_ACCEPT)) {
			got++;
		} else if (r == PSP_ARP_REPLY) {
			p->arp_pkts[narp++] = m;
		} else {
			drops[r]++;
			any_drop = 1;
			p->drop_pkts[ndrop++] = m;
		}
	}
	if (ndrop > 0)
		rte_pktmbuf_free_bulk(p->drop_pkts, ndrop);
	if (narp > 0) {
		uint16_t sent = rte_eth_tx_burst(p->port_id, p->ctl_txq,
						 p->arp_pkts, narp);
		if (sent < narp) {
			rte_pktmbuf_free_bulk(p->arp_pkts + sent, narp - sent);
			psp_count(p, PSP_CTR_ARP_TX_ERRORS, narp - sent);
		}
		psp_count(p, PSP_CTR_ARP_REPLIES, sent);
	}
	if (any_drop) {
		for (int r = 0; r < PSP_DROP_REASONS; r++)
			if (drops[r] != 0)
				psp_count(p, r, drops[r]);
	}
	psp_count(p, PSP_CTR_RX_POLLED, nb);
	psp_count(p, PSP_CTR_RX_DELIVERED, got);
	return got;
}

static inline void
psp_build_reply(struct psp_port *p, struct rte_mbuf *m,
		const struct psp_tx_desc *d)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint16_t ihl = (uint16_t)((ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)((uint8_t *)ip + ihl);
	uint16_t udp_len = (uint16_t)(sizeof(*udp) + d->len);

	eth->dst_addr = eth->src_addr;
	eth->src_addr = p->mac;

	memcpy(&ip->dst_addr, d->peer_ip, 4);
	ip->src_addr = p->ip;
	ip->time_to_live = 64;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(ihl + udp_len));
	ip->fragment_offset = 0;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = (uint16_t)~rte_raw_cksum(ip, ihl);

	udp->src_port = rte_cpu_to_be_16(d->src_port);
	udp->dst_port = rte_cpu_to_be_16(d->peer_port);
	udp->dgram_len = rte_cpu_to_be_16(udp_len);
	udp->dgram_cksum = 0;
	uint16_t ck = (uint16_t)~psp_udp_sum(ip, udp, udp_len);
	udp->dgram_cksum = ck == 0 ? 0xffff : ck;

	m->data_len = (uint16_t)(sizeof(*eth) + ihl + udp_len);
	m->pkt_len = m->data_len;
	m->ol_flags = 0;
}

static inline uint16_t
psp_send(struct psp_port *p, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t sent = 0;
	for (int tries = 0; tries < PSP_TX_RETRIES && sent < n; tries++)
		sent += rte_eth_tx_burst(p->port_id, queue, pkts + sent, n - sent);
	if (sent < n)
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	return sent;
}

uint16_t
psp_tx(struct psp_port *p, uint16_t queue, uint16_t n)
{
	struct psp_txq *q = &p->txqs[queue];
	uint16_t k = 0;

	if (n > p->burst)
		n = p->burst;
	for (uint16_t i = 0; i < n; i++) {
		const struct psp_tx_desc *d = &q->descs[i];
		struct rte_mbuf *m = (struct rte_mbuf *)d->mbuf;
		if (unlikely(d->len == PSP_TX_DROP)) {
			rte_pktmbuf_free(m);
			continue;
		}
		psp_build_reply(p, m, d);
		q->pkts[k++] = m;
	}
	if (k == 0)
		return 0;
	return psp_send(p, queue, q->pkts, k);
}

void
psp_free_scratch(struct psp_port *p, uint16_t n)
{
	if (n > p->burst)
		n = p->burst;
	for (uint16_t i = 0; i < n; i++)
		rte_pktmbuf_free((struct rte_mbuf *)p->scratch[i]);
}

int
psp_alloc_reply(struct psp_port *p, uintptr_t req, struct psp_rx_desc *d)
{
	struct rte_mbuf *r = (struct rte_mbuf *)req;
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(r, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint16_t ihl = (uint16_t)((ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4);
	uint16_t hdr = (uint16_t)(sizeof(*eth) + ihl + sizeof(struct rte_udp_hdr));
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	if (m == NULL)
		return -ENOBUFS;
	uint8_t *frame = rte_pktmbuf_mtod(m, uint8_t *);
	memcpy(frame, eth, hdr);
	m->data_len = hdr;
	m->pkt_len = hdr;
	uint8_t *payload = frame + hdr;
	uint8_t *end = (uint8_t *)m->buf_addr + m->buf_len;
	uint32_t room = (uint32_t)(end - payload);
	uint32_t mtu_room = p->mtu - ihl - sizeof(struct rte_udp_hdr);
	if (room > mtu_room)
		room = mtu_room;
	d->mbuf = (uintptr_t)m;
	d->payload = payload;
	d->index = *(uint32_t *)rte_mbuf_to_priv(m);
	d->len = 0;
	d->room = (uint16_t)room;
	return 0;
}

/* psp_alloc_append allocates an mbuf from p's pool holding len bytes of
 * data and points *data at them. It returns NULL and sets *err (-ENOBUFS or
 * -EMSGSIZE) when it cannot. */
static struct rte_mbuf *
psp_alloc_append(struct psp_port *p, uint16_t len, char **data, int *err)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	if (m == NULL) {
		*err = -ENOBUFS;
		return NULL;
	}
	*data = rte_pktmbuf_append(m, len);
	if (*data == NULL) {
		rte_pktmbuf_free(m);
		*err = -EMSGSIZE;
		return NULL;
	}
	return m;
}

int
psp_tx_raw(struct psp_port *p, const uint8_t *frame, uint16_t len)
{
	char *dst;
	int err;
	struct rte_mbuf *m = psp_alloc_append(p, len, &dst, &err);
	if (m == NULL)
		return err;
	memcpy(dst, frame, len);
	if (psp_send(p, p->ctl_txq, &m, 1) != 1)
		return -EAGAIN;
	psp_count(p, PSP_CTR_RAW_TX, 1);
	return 0;
}

int
psp_tx_self(struct psp_port *p, const uint8_t *payload, uint16_t len,
	    uint16_t udp_port)
{
	const uint16_t hdr = sizeof(struct rte_ether_hdr) +
			     sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr);
	if (len > p->mtu - sizeof(struct rte_ipv4_hdr) - sizeof(struct rte_udp_hdr))
		return -EMSGSIZE;
	char *data;
	int err;
	struct rte_mbuf *m = psp_alloc_append(p, hdr + len, &data, &err);
	if (m == NULL)
		return err;
	uint8_t *frame = (uint8_t *)data;
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)frame;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	uint16_t udp_len = (uint16_t)(sizeof(*udp) + len);

	eth->dst_addr = p->mac;
	eth->src_addr = p->mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + udp_len));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = p->ip;
	ip->dst_addr = p->ip;
	ip->hdr_checksum = (uint16_t)~rte_raw_cksum(ip, sizeof(*ip));
	udp->src_port = rte_cpu_to_be_16(udp_port);
	udp->dst_port = rte_cpu_to_be_16(udp_port);
	udp->dgram_len = rte_cpu_to_be_16(udp_len);
	udp->dgram_cksum = 0;
	memcpy(udp + 1, payload, len);
	uint16_t ck = (uint16_t)~psp_udp_sum(ip, udp, udp_len);
	udp->dgram_cksum = ck == 0 ? 0xffff : ck;
	if (psp_send(p, p->ctl_txq, &m, 1) != 1)
		return -EAGAIN;
	psp_count(p, PSP_CTR_RAW_TX, 1);
	return 0;
}

int
psp_vdev_add(const char *name, const char *args, char *err, size_t errlen)
{
	uint16_t port_id;
	int ret = rte_eal_hotplug_add("vdev", name, args);
	if (ret != 0) {
		psp_errf(err, errlen, "hotplug: %s", ret);
		return ret < 0 ? ret : -ret;
	}
	ret = rte_eth_dev_get_port_by_name(name, &port_id);
	if (ret != 0) {
		rte_eal_hotplug_remove("vdev", name);
		psp_errf(err, errlen, "no ethernet port for the device: %s", ret);
		return ret < 0 ? ret : -ret;
	}
	return port_id;
}

int
psp_vdev_remove(const char *name)
{
	int ret = rte_eal_hotplug_remove("vdev", name);
	/*
	 * A net_ring device created by name makes RTE_PMD_RING_MAX_RX_RINGS
	 * rings, "ETH_RXTX<i>_<name>", but its close frees only those of the
	 * rx queues configured (one here): free the others, or the next device
	 * of that name cannot create them ("RING: Cannot reserve memory").
	 */
	if (ret == 0 && strncmp(name, "net_ring", 8) == 0) {
		char rng_name[RTE_RING_NAMESIZE];
		for (unsigned i = 0; i < RTE_PMD_RING_MAX_RX_RINGS; i++) {
			int cc = snprintf(rng_name, sizeof(rng_name), "ETH_RXTX%u_%s", i, name);
			if (cc < 0 || cc >= (int)sizeof(rng_name))
				break;
			struct rte_ring *r = rte_ring_lookup(rng_name);
			if (r != NULL)
				rte_ring_free(r);
		}
	}
	return ret;
}

static void
psp_count_memzone(const struct rte_memzone *mz, void *arg)
{
	(void)mz;
	(*(uint64_t *)arg)++;
}

void
psp_eal_usage(uint64_t *memzones, uint64_t *heap_bytes)
{
	*memzones = 0;
	rte_memzone_walk(psp_count_memzone, memzones);
	*heap_bytes = 0;
	for (int s = 0; s < RTE_MAX_NUMA_NODES; s++) {
		struct rte_malloc_socket_stats st;
		if (rte_malloc_get_socket_stats(s, &st) == 0)
			*heap_bytes += st.heap_allocsz_bytes;
	}
}

struct psp_ring_pair {
	struct rte_ring *rx;
	struct rte_ring *tx;
	uint16_t port_id;
	char name[RTE_RING_NAMESIZE];
};

uint16_t psp_ring_pair_port(const struct psp_ring_pair *rp) { return rp->port_id; }

struct psp_ring_pair *
psp_ring_pair_create(const char *name, uint16_t tx_queues, char *err, size_t errlen)
{
	char rname[RTE_RING_NAMESIZE];
	struct rte_ring *txs[RTE_PMD_RING_MAX_TX_RINGS];
	struct psp_ring_pair *rp = psp_calloc(1, sizeof(*rp));

	if (rp == NULL)
		return NULL;
	if (tx_queues == 0 || tx_queues > RTE_PMD_RING_MAX_TX_RINGS) {
		snprintf(err, errlen, "%u tx queues: a ring port has at most %d",
			 tx_queues, RTE_PMD_RING_MAX_TX_RINGS);
		free(rp);
		return NULL;
	}
	snprintf(rp->name, sizeof(rp->name), "%s", name);
	snprintf(rname, sizeof(rname), "%s_rx", name);
	rp->rx = rte_ring_create(rname, 4096, SOCKET_ID_ANY, 0);
	snprintf(rname, sizeof(rname), "%s_tx", name);
	rp->tx = rte_ring_create(rname, 4096, SOCKET_ID_ANY, 0);
	if (rp->rx == NULL || rp->tx == NULL) {
		psp_errf(err, errlen, "ring: %s", rte_errno);
		goto fail;
	}
	for (uint16_t i = 0; i < tx_queues; i++)
		txs[i] = rp->tx;
	int port = rte_eth_from_rings(name, &rp->rx, 1, txs, tx_queues,
				      SOCKET_ID_ANY);
	if (port < 0) {
		psp_errf(err, errlen, "port from rings: %s", rte_errno);
		goto fail;
	}
	rp->port_id = (uint16_t)port;
	return rp;
fail:
	rte_ring_free(rp->rx);
	rte_ring_free(rp->tx);
	free(rp);
	return NULL;
}

unsigned
psp_ring_pair_drain(struct psp_ring_pair *rp)
{
	void *objs[64];
	unsigned total = 0, n;
	struct rte_ring *rings[2] = {rp->rx, rp->tx};
	for (int r = 0; r < 2; r++) {
		while ((n = rte_ring_dequeue_burst(rings[r], objs, 64, NULL)) > 0) {
			rte_pktmbuf_free_bulk((struct rte_mbuf **)objs, n);
			total += n;
		}
	}
	return total;
}

void
psp_ring_pair_free(struct psp_ring_pair *rp)
{
	rte_vdev_uninit(rp->name);
	rte_ring_free(rp->rx);
	rte_ring_free(rp->tx);
	free(rp);
}

int
psp_ring_pair_inject(struct psp_ring_pair *rp, struct psp_port *p,
		     const uint8_t *frame, uint16_t len)
{
	char *dst;
	int err;
	struct rte_mbuf *m = psp_alloc_append(p, len, &dst, &err);
	if (m == NULL)
		return err;
	memcpy(dst, frame, len);
	if (rte_ring_enqueue(rp->rx, m) != 0) {
		rte_pktmbuf_free(m);
		return -ENOBUFS;
	}
	return 0;
}

/* Returns the frame's length (copied up to cap), 0 when none, or -1 when the
 * frame was longer than cap. */
int
psp_ring_pair_collect(struct psp_ring_pair *rp, uint8_t *buf, uint16_t cap)
{
	void *obj;
	if (rte_ring_dequeue(rp->tx, &obj) != 0)
		return 0;
	struct rte_mbuf *m = obj;
	int len = rte_pktmbuf_pkt_len(m);
	int ret = len;
	if (len > cap)
		ret = -1;
	else
		rte_memcpy(buf, rte_pktmbuf_mtod(m, void *), len);
	rte_pktmbuf_free(m);
	return ret;
}

/* Turns up to max transmitted replies back into requests (swapping the
 * addresses leaves both checksums valid) and receives them again: a closed
 * loop for benchmarks. */
unsigned
psp_ring_pair_reflect(struct psp_ring_pair *rp, unsigned max)
{
	void *objs[256];
	if (max > 256)
		max = 256;
	unsigned n = rte_ring_dequeue_burst(rp->tx, objs, max, NULL);
	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = objs[i];
		struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
		struct rte_ether_addr a = eth->src_addr;
		eth->src_addr = eth->dst_addr;
		eth->dst_addr = a;
		if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
			continue;
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
		uint32_t t = ip->src_addr;
		ip->src_addr = ip->dst_addr;
		ip->dst_addr = t;
		struct rte_udp_hdr *udp = (struct rte_udp_hdr *)((uint8_t *)ip +
			(ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4);
		uint16_t pt = udp->src_port;
		udp->src_port = udp->dst_port;
		udp->dst_port = pt;
	}
	unsigned sent = rte_ring_enqueue_burst(rp->rx, objs, n, NULL);
	if (sent < n)
		rte_pktmbuf_free_bulk((struct rte_mbuf **)objs + sent, n - sent);
	return sent;
}
