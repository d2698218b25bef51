"""Writes the Tinker SDK's wire schema as a .proto file, and checks one.

The SDK ships its protobuf schema only compiled, as the serialized
FileDescriptorProto inside tinker/proto/tinker_public_pb2.py. This script
reads that descriptor from the installed SDK and prints it back as proto3
source, so that rlvr can generate Go from it with protoc like any other
.proto (api/tinker/tinkerpb, scripts/tinker-proto.sh):

    python tinker_proto_schema.py write OUT.proto     # render the schema
    python tinker_proto_schema.py check DESC.pb       # protoc's descriptor
                                                      # of OUT.proto must equal
                                                      # the SDK's, field by field

Only the constructs the schema uses are rendered (messages, nested map
entries, enums, oneofs, proto3 optional, scalar and message fields); any
other construct is an error, so a new SDK cannot be rendered wrong silently.
"""

import sys

from google.protobuf import descriptor_pb2
from tinker import __version__ as sdk_version
from tinker.proto import tinker_public_pb2

F = descriptor_pb2.FieldDescriptorProto

SCALARS = {
    F.TYPE_DOUBLE: "double",
    F.TYPE_FLOAT: "float",
    F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64",
    F.TYPE_INT32: "int32",
    F.TYPE_UINT32: "uint32",
    F.TYPE_BOOL: "bool",
    F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes",
    F.TYPE_SINT32: "sint32",
    F.TYPE_SINT64: "sint64",
    F.TYPE_FIXED32: "fixed32",
    F.TYPE_FIXED64: "fixed64",
    F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64",
}

HEADER = """\
// The Tinker API's public wire schema, package tinker_public, as the
// official Tinker Python SDK (PyPI "tinker" {version}, Apache-2.0,
// https://github.com/thinking-machines-lab/tinker) compiles it into
// tinker/proto/tinker_public_pb2.py. The SDK ships no .proto source: this
// file is that descriptor printed back as proto3 by
// python/tinker_proto_schema.py, and scripts/tinker-proto.sh checks that
// protoc compiles it to the SDK's descriptor exactly. Do not edit; rerun
// scripts/tinker-proto.sh against a newer SDK instead.
"""


def sdk_descriptor():
    fd = descriptor_pb2.FileDescriptorProto()
    fd.ParseFromString(tinker_public_pb2.DESCRIPTOR.serialized_pb)
    return fd


def type_name(field, package):
    if field.type in SCALARS:
        return SCALARS[field.type]
    if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM):
        name = field.type_name.lstrip(".")
        return name[len(package) + 1 :] if name.startswith(package + ".") else "." + name
    raise ValueError(f"field {field.name}: type {field.type} is not rendered")


def render_message(msg, package, indent, out):
    pad = "  " * indent
    if msg.options.ByteSize() and not msg.options.map_entry:
        raise ValueError(f"message {msg.name}: options are not rendered")
    if msg.extension or msg.extension_range or msg.reserved_range or msg.enum_type:
        raise ValueError(f"message {msg.name}: a construct that is not rendered")
    out.append(f"{pad}message {msg.name} {{")
    entries = {n.name: n for n in msg.nested_type if n.options.map_entry}
    for nested in msg.nested_type:
        if not nested.options.map_entry:
            render_message(nested, package, indent + 1, out)
    # Synthetic oneofs (proto3 optional) are not written as oneofs.
    real = [
        i
        for i, _ in enumerate(msg.oneof_decl)
        if not any(f.HasField("oneof_index") and f.oneof_index == i and f.proto3_optional for f in msg.field)
    ]
    emitted = set()
    for field in msg.field:
        if field.options.ByteSize() or field.HasField("default_value"):
            raise ValueError(f"field {msg.name}.{field.name}: options are not rendered")
        in_oneof = field.HasField("oneof_index") and field.oneof_index in real
        if in_oneof:
            if field.oneof_index in emitted:
                continue
            emitted.add(field.oneof_index)
            i = field.oneof_index
            out.append(f"{pad}  oneof {msg.oneof_decl[i].name} {{")
            for member in msg.field:
                if member.HasField("oneof_index") and member.oneof_index == i:
                    out.append(f"{pad}    {type_name(member, package)} {member.name} = {member.number};")
            out.append(f"{pad}  }}")
            continue
        short = field.type_name.rsplit(".", 1)[-1]
        if field.label == F.LABEL_REPEATED and field.type == F.TYPE_MESSAGE and short in entries:
            entry = entries[short]
            key, value = entry.field[0], entry.field[1]
            out.append(
                f"{pad}  map<{type_name(key, package)}, {type_name(value, package)}> {field.name} = {field.number};"
            )
            continue
        label = ""
        if field.label == F.LABEL_REPEATED:
            label = "repeated "
        elif field.proto3_optional:
            label = "optional "
        out.append(f"{pad}  {label}{type_name(field, package)} {field.name} = {field.number};")
    out.append(f"{pad}}}")


def render(fd):
    if fd.syntax != "proto3" or fd.dependency or fd.service or fd.extension or fd.options.ByteSize():
        raise ValueError("the schema uses a construct that is not rendered")
    out = [HEADER.format(version=sdk_version), 'syntax = "proto3";', "", f"package {fd.package};", ""]
    for msg in fd.message_type:
        render_message(msg, fd.package, 0, out)
        out.append("")
    for enum in fd.enum_type:
        out.append(f"enum {enum.name} {{")
        for v in enum.value:
            out.append(f"  {v.name} = {v.number};")
        out.append("}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def strip_json_names(messages):
    """Clears the json_name protoc adds to every field: the SDK's
    descriptor, compiled without it, has none."""
    for msg in messages:
        for field in msg.field:
            field.ClearField("json_name")
        strip_json_names(msg.nested_type)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    want = sdk_descriptor()
    if argv[1] == "write":
        with open(argv[2], "w") as f:
            f.write(render(want))
        print(f"tinker {sdk_version}: wrote {argv[2]}")
        return
    got_set = descriptor_pb2.FileDescriptorSet()
    with open(argv[2], "rb") as f:
        got_set.ParseFromString(f.read())
    got = got_set.file[-1]
    got.ClearField("source_code_info")
    strip_json_names(got.message_type)
    if got.SerializeToString(deterministic=True) != want.SerializeToString(deterministic=True):
        sys.exit(f"the rendered .proto does not compile to tinker {sdk_version}'s descriptor:\n{got}\n---\n{want}")
    print(f"tinker {sdk_version}: the .proto compiles to the SDK's descriptor exactly")


if __name__ == "__main__":
    main(sys.argv)
