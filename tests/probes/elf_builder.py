"""Build small ELF64 files for the live probe's tests: a stand-in libnccl whose identity is known.

Not a loadable library: enough of one for the probe's reader (the ELF header, a PT_NOTE program
header, the section table with .note.gnu.build-id, .rodata and .shstrtab) and for `mmap`, which
puts its path in /proc/PID/maps as the dynamic linker would.
"""

from __future__ import annotations

import struct

ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
PROGRAM = struct.Struct("<IIQQQQQQ")
SECTION = struct.Struct("<IIQQQQIIQQ")
SHT_PROGBITS, SHT_NOTE, SHT_STRTAB = 1, 7, 3
PT_NOTE = 4


def build_id_note(build_id: bytes) -> bytes:
    name = b"GNU\0"
    return struct.pack("<III", len(name), len(build_id), 3) + name + build_id


def build_elf(
    rodata: bytes = b"\0NCCL version 2.99.1+cuda12.9\0",
    build_id: bytes = bytes(range(20)),
    sections: bool = True,
    padding: int = 0,
) -> bytes:
    """An ELF64 little-endian shared object: header, one PT_NOTE, the note, .rodata, `padding`
    zero bytes, .shstrtab and the section table (none when `sections` is False)."""
    note = build_id_note(build_id)
    names = b"\0.note.gnu.build-id\0.rodata\0.shstrtab\0"
    note_at = ELF_HEADER.size + PROGRAM.size
    rodata_at = note_at + len(note)
    names_at = rodata_at + len(rodata) + padding
    table_at = names_at + len(names)
    table_at += -table_at % 8
    shnum = 4 if sections else 0
    header = ELF_HEADER.pack(
        b"\x7fELF\x02\x01\x01" + bytes(9),  # 64-bit, little-endian, version 1
        3,  # ET_DYN
        62,  # x86-64
        1,
        0,
        ELF_HEADER.size,  # e_phoff
        table_at if sections else 0,  # e_shoff
        0,
        ELF_HEADER.size,
        PROGRAM.size,
        1,
        SECTION.size,
        shnum,
        3 if sections else 0,  # e_shstrndx
    )
    program = PROGRAM.pack(PT_NOTE, 4, note_at, note_at, note_at, len(note), len(note), 4)
    body = header + program + note + rodata + bytes(padding) + names
    body += bytes(table_at - len(body))
    if sections:
        body += SECTION.pack(*([0] * 10))
        body += SECTION.pack(1, SHT_NOTE, 2, 0, note_at, len(note), 0, 0, 4, 0)
        body += SECTION.pack(20, SHT_PROGBITS, 2, 0, rodata_at, len(rodata), 0, 0, 16, 0)
        body += SECTION.pack(28, SHT_STRTAB, 0, 0, names_at, len(names), 0, 0, 1, 0)
    return body
