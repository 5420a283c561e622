"""Chakra execution traces of a step schedule for ASTRA-sim's custom collectives
(docs/formats.md "Chakra / ASTRA-sim").

Facts of mlcommons/chakra's schema (schema/protobuf/et_def.proto, package ChakraProtoMsg)
this writer builds its message descriptors from: ``GlobalMetadata`` {version = 1, attr = 2};
``Node`` {id = 1 (uint64), name = 2, type = 3 (NodeType), ctrl_deps = 4 and data_deps = 5
(repeated uint64), attr = 10 (repeated AttributeProto)}; ``AttributeProto`` {name = 1, and in
its ``value`` oneof int32_val = 7, int64_val = 9, uint64_val = 13, bool_val = 27, string_val =
29}; NodeType COMP_NODE = 4, COMM_SEND_NODE = 5, COMM_RECV_NODE = 6, COMM_COLL_NODE = 7;
CollectiveCommType ALL_REDUCE = 0, ALL_GATHER = 2, ALL_TO_ALL = 6, REDUCE_SCATTER = 7. A file
is the GlobalMetadata, then every node, each message preceded by its length as a varint (as
chakra's own encoder writes them). The feeder reads ``comm_src``, ``comm_dst``, ``comm_tag``
as int32_val, ``comm_size`` and ``comm_type`` as int64_val, ``is_cpu_op`` as bool_val.

One file per rank, ``PREFIX.<rank>.et``: every send row (t, v, lo, hi, u, w) is a COMM_SEND
node on rank u and a COMM_RECV node on rank w with the same comm_tag (the row's index), of
its bytes (shard v holds bytes [⌊v·M/N⌋, ⌊(v+1)·M/N⌋) and chunk c of it the c-th of P
equal integer cuts, so the sizes add up to M per shard exactly). A send's data_deps are the
receives that bring its data to u: in an allgather the chunk's receives at the earliest
earlier step, in a reduce-scatter every earlier receive of the chunk (all partials), and an
allreduce's owner waits for every reduce-scatter receive of its shard; its ctrl_deps are the
sends on the same link at the link's previous step, so a link serves its steps in order.
Reductions are free (no compute nodes), as in the α-β model.
"""

from __future__ import annotations

import json
import os

import numpy as np

from topofinder.compute.output import write_bytes
from topofinder.errors import TopofinderError
from topofinder.model.collectives import Collective
from topofinder.model.schedule import StepSchedule
from topofinder.scoring.links import Links

#: CollectiveCommType of each collective, and the system-configuration key of its custom ET.
COMM_TYPE = {Collective.ALLREDUCE: 0, Collective.ALLGATHER: 2, Collective.REDUCE_SCATTER: 7}
SYSTEM_KEY = {Collective.ALLREDUCE: "all-reduce-implementation-custom",
              Collective.ALLGATHER: "all-gather-implementation-custom",
              Collective.REDUCE_SCATTER: "reduce-scatter-implementation-custom"}
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
#: The analytical backend's GB is 2^30 bytes (astra-network-analytical bw_GBps_to_Bpns).
_GB = float(1 << 30)


def messages():
    """(GlobalMetadata, Node) message classes made here from the schema facts above."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise TopofinderError("the Chakra export needs the protobuf package: pip install "
                              "'topofinder[chakra]'") from None
    fd = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="topofinder/chakra_et.proto",
                                           package="ChakraProtoMsg", syntax="proto3")
    types = f.enum_type.add(name="NodeType")
    for name, number in (("INVALID_NODE", 0), ("METADATA_NODE", 1), ("MEM_LOAD_NODE", 2),
                         ("MEM_STORE_NODE", 3), ("COMP_NODE", 4), ("COMM_SEND_NODE", 5),
                         ("COMM_RECV_NODE", 6), ("COMM_COLL_NODE", 7)):
        types.value.add(name=name, number=number)
    attr = f.message_type.add(name="AttributeProto")
    attr.oneof_decl.add(name="value")
    attr.field.add(name="name", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    attr.field.add(name="doc_string", number=2, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    for name, number, kind in (("int32_val", 7, fd.TYPE_INT32), ("int64_val", 9, fd.TYPE_INT64),
                               ("uint64_val", 13, fd.TYPE_UINT64), ("bool_val", 27, fd.TYPE_BOOL),
                               ("string_val", 29, fd.TYPE_STRING)):
        attr.field.add(name=name, number=number, type=kind, label=fd.LABEL_OPTIONAL,
                       oneof_index=0)
    meta = f.message_type.add(name="GlobalMetadata")
    meta.field.add(name="version", number=1, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    meta.field.add(name="attr", number=2, type=fd.TYPE_MESSAGE, label=fd.LABEL_REPEATED,
                   type_name=".ChakraProtoMsg.AttributeProto")
    node = f.message_type.add(name="Node")
    node.field.add(name="id", number=1, type=fd.TYPE_UINT64, label=fd.LABEL_OPTIONAL)
    node.field.add(name="name", number=2, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    node.field.add(name="type", number=3, type=fd.TYPE_ENUM, label=fd.LABEL_OPTIONAL,
                   type_name=".ChakraProtoMsg.NodeType")
    for name, number in (("ctrl_deps", 4), ("data_deps", 5)):
        node.field.add(name=name, number=number, type=fd.TYPE_UINT64, label=fd.LABEL_REPEATED)
    node.field.add(name="attr", number=10, type=fd.TYPE_MESSAGE, label=fd.LABEL_REPEATED,
                   type_name=".ChakraProtoMsg.AttributeProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName(
        "ChakraProtoMsg.GlobalMetadata")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("ChakraProtoMsg.Node")))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(0x80 | bits)
        else:
            out.append(bits)
            return bytes(out)


def delimited(message) -> bytes:
    """A message preceded by its length as a varint (chakra's encodeMessage framing)."""
    data = message.SerializeToString()
    return _varint(len(data)) + data


def read_delimited(data: bytes, cls, start: int = 0):
    """(message, next offset) of the length-delimited message at ``start``."""
    length, shift, pos = 0, 0, start
    while True:
        byte = data[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    msg = cls()
    msg.ParseFromString(data[pos:pos + length])
    return msg, pos + length


def row_bytes(schedule: StepSchedule, size: int) -> np.ndarray:
    """Bytes of each send row (module docstring: integer cuts of every shard)."""
    n, p = schedule.topology.n, schedule.shard_chunks
    s = schedule.sends
    shard_start = (s[:, 1] * size) // n
    shard = ((s[:, 1] + 1) * size) // n - shard_start
    return (shard * s[:, 3]) // p - (shard * s[:, 2]) // p


def rank_nodes(schedule: StepSchedule, size: int) -> list[list[tuple]]:
    """Per rank, its nodes (id, type, peer src, peer dst, bytes, tag, data_deps, ctrl_deps, t)
    in step order."""
    s, n = schedule.sends, schedule.topology.n
    order = np.lexsort((s[:, 5], s[:, 4], s[:, 3], s[:, 2], s[:, 1], s[:, 0]))
    s = s[order]
    nbytes = row_bytes(StepSchedule(schedule.topology, schedule.shard_chunks, s,
                                    schedule.collective, reduce_steps=schedule.reduce_steps),
                       size)
    split = schedule.reduce_steps if schedule.collective == Collective.ALLREDUCE else (
        schedule.num_steps if schedule.collective == Collective.REDUCE_SCATTER else 0)
    nodes: list[list[tuple]] = [[] for _ in range(n)]
    recv_id = np.empty(s.shape[0], np.int64)
    send_id = np.empty(s.shape[0], np.int64)
    # receives of each (phase, node, shard, chunk): (step, node id) lists
    got: dict = {}
    on_link: dict = {}            # link -> (its latest step, its sends there, before)
    for i, (t, v, lo, hi, u, w) in enumerate(s.tolist()):
        reducing = t <= split
        data = []
        for c in range(lo, hi):
            if reducing:
                data += [r for step, r in got.get((True, u, v, c), ()) if step < t]
            elif u == v and split:
                data += [r for _, r in got.get((True, u, v, c), ())]
            else:
                earlier = [(step, r) for step, r in got.get((False, u, v, c), ()) if step < t]
                if earlier:
                    first = min(step for step, _ in earlier)
                    data += [r for step, r in earlier if step == first]
        step, current, previous = on_link.get((u, w), (0, [], []))
        if step != t:
            step, current, previous = t, [], current
        send_id[i] = len(nodes[u])
        current.append(int(send_id[i]))
        on_link[u, w] = (step, current, previous)
        nodes[u].append((send_id[i], COMM_SEND_NODE, u, w, int(nbytes[i]), i,
                         sorted(set(data)), list(previous), t))
        recv_id[i] = len(nodes[w])
        nodes[w].append((recv_id[i], COMM_RECV_NODE, u, w, int(nbytes[i]), i, [], [], t))
        for c in range(lo, hi):
            got.setdefault((reducing, w, v, c), []).append((t, int(recv_id[i])))
    return nodes


def rank_files(schedule: StepSchedule, size: int) -> list[bytes]:
    """The bytes of each rank's custom-collective ET file."""
    meta_cls, node_cls = messages()
    header = delimited(meta_cls(version="0.0.4"))
    out = []
    for rank, nodes in enumerate(rank_nodes(schedule, size)):
        parts = [header]
        for nid, kind, src, dst, nbytes, tag, data, ctrl, t in nodes:
            node = node_cls(id=int(nid), type=kind, data_deps=[int(x) for x in data],
                            ctrl_deps=[int(x) for x in ctrl],
                            name=f"{'send' if kind == COMM_SEND_NODE else 'recv'} t{t} "
                                 f"{src}->{dst}")
            for name, field, value in (("is_cpu_op", "bool_val", False),
                                       ("comm_src", "int32_val", src),
                                       ("comm_dst", "int32_val", dst),
                                       ("comm_size", "int64_val", nbytes),
                                       ("comm_tag", "int32_val", tag)):
                a = node.attr.add()
                a.name = name
                setattr(a, field, value)
            parts.append(delimited(node))
        out.append(b"".join(parts))
    return out


def workload_file(collective: str, size: int) -> bytes:
    """One rank's workload ET: the collective as a single COMM_COLL_NODE of ``size`` bytes."""
    meta_cls, node_cls = messages()
    node = node_cls(id=0, name=f"{collective} {size} bytes", type=COMM_COLL_NODE)
    for name, field, value in (("is_cpu_op", "bool_val", False),
                               ("comm_type", "int64_val", COMM_TYPE[collective]),
                               ("comm_size", "int64_val", size)):
        a = node.attr.add()
        a.name = name
        setattr(a, field, value)
    return delimited(meta_cls(version="0.0.4")) + delimited(node)


def write_chakra(schedule: StepSchedule, directory: str | os.PathLike, *, size: int,
                 alpha_s: float, bandwidth_Bps: float, prefix: str | None = None) -> dict:
    """Write the ASTRA-sim bundle into ``directory`` (module docstring; docs/formats.md):
    ``PREFIX.<rank>.et`` (the custom collective), ``workload.<rank>.et``, ``system.json``,
    ``network.yml`` (analytical backend, FullyConnected: a dedicated link per ordered pair,
    of which the trace uses only the cabled ones; b = B/d in GB/s of 2^30 bytes, α in ns),
    ``remote_memory.json`` and ``links.csv`` (the cabled links). Returns what was written."""
    if not isinstance(schedule, StepSchedule) or schedule.collective not in COMM_TYPE:
        raise TopofinderError("the Chakra export writes allgather, reduce-scatter and "
                              "allreduce step schedules")
    topo = schedule.topology
    links = Links.of(topo)
    if np.unique(links.cap).size > 1:
        raise TopofinderError(f"{topo.expr} has links of different capacities; ASTRA-sim's "
                              f"analytical network gives every link one bandwidth")
    if int(size) != size or size < topo.n:
        raise TopofinderError(f"the Chakra export needs a size of at least N = {topo.n} whole "
                              f"bytes, got {size}")
    size = int(size)
    prefix = prefix or schedule.collective.replace("-", "_")
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    link_bw = bandwidth_Bps / topo.node_bandwidth * int(links.cap[0])
    files = {}
    for rank, data in enumerate(rank_files(schedule, size)):
        files[f"{prefix}.{rank}.et"] = data
    workload = workload_file(schedule.collective, size)
    for rank in range(topo.n):
        files[f"workload.{rank}.et"] = workload
    system = {"scheduling-policy": "FIFO", "endpoint-delay": 0,
              "active-chunks-per-dimension": 1, "preferred-dataset-splits": 1,
              SYSTEM_KEY[schedule.collective]: [os.path.join(os.path.abspath(directory),
                                                             prefix)],
              "local-mem-bw": 50, "boost-mode": 0}
    files["system.json"] = (json.dumps(system, indent=2) + "\n").encode()
    files["network.yml"] = (
        f"# {topo.expr}: N = {topo.n}; the trace sends only on its {links.num} cabled links "
        f"(links.csv)\ntopology: [ FullyConnected ]\nnpus_count: [ {topo.n} ]\n"
        f"bandwidth: [ {link_bw / _GB!r} ]  # GB/s (2^30 bytes), b = B/d per link\n"
        f"latency: [ {alpha_s * 1e9!r} ]  # ns, alpha\n").encode()
    files["remote_memory.json"] = b'{\n  "memory-type": "NO_MEMORY_EXPANSION"\n}\n'
    files["links.csv"] = ("src,dst,capacity\n" + "".join(
        f"{u},{w},{c}\n" for u, w, c in zip(links.tail.tolist(), links.head.tolist(),
                                           links.cap.tolist()))).encode()
    for name, data in files.items():
        write_bytes(os.path.join(directory, name), data)
    return {"directory": directory, "prefix": prefix, "ranks": topo.n, "files": len(files),
            "sends": schedule.num_sends, "bytes": int(row_bytes(schedule, size).sum())}
