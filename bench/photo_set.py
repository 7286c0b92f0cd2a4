#!/usr/bin/env python3
"""photo_set.py OUT: a JPEG set of real photographs for decode-quality checks
(bench/loader_psnr.py), made offline from the photos that ship inside
installed Python packages: scikit-image's sample images (skimage/data:
astronaut, chelsea, coffee, rocket, motorcycle, ...) and matplotlib's
sample_data (grace_hopper.jpg, ...); --src DIR adds the images of a
directory of your own.

Each colour photo (RGB, shorter side >= 200 px) is written in the layouts a
data set holds: JPEG quality 75, 90 and 95, chroma 4:2:0, 4:2:2 and 4:4:4
(Pillow, baseline), at full size and at half size, so the set covers the
codings the GPU path decodes. The set is written to OUT/photos/ (one class,
ImageFolder layout); a list of the sources goes to OUT/SOURCES.txt.

  bench/photo_set.py /tmp/photos [--src DIR] [--min-photos 3]
Exit 1 with one line when fewer than --min-photos photos are found."""
import argparse
import glob
import os
import sys

from PIL import Image


def candidates(extra):
    dirs = []
    try:
        import skimage.data
        dirs.append(os.path.dirname(skimage.data.__file__))
    except Exception:
        pass
    try:
        import matplotlib
        # get_data_path: Debian keeps mpl-data in /usr/share/matplotlib, not beside the package
        dirs.append(os.path.join(matplotlib.get_data_path(), "sample_data"))
    except Exception:
        pass
    dirs += extra
    files = []
    for d in dirs:
        for ext in ("png", "jpg", "jpeg", "PNG", "JPG", "JPEG"):
            files += glob.glob(os.path.join(d, "**", "*." + ext), recursive=True)
    return sorted(set(files))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--src", action="append", default=[], help="another directory of photos")
    ap.add_argument("--min-photos", type=int, default=3)
    ap.add_argument("--min-side", type=int, default=200)
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "photos"), exist_ok=True)
    used = []
    for path in candidates(a.src):
        try:
            im = Image.open(path)
            im.load()
        except Exception:
            continue
        if im.mode not in ("RGB", "RGBA") or min(im.size) < a.min_side:
            continue  # grayscale test patterns, logos, icons
        rgb = im.convert("RGB")
        # a photograph has many distinct colours; drawings and charts few
        if len(rgb.resize((64, 64)).getcolors(64 * 64) or range(4097)) < 1500:
            continue
        name = os.path.splitext(os.path.basename(path))[0]
        used.append(f"{path} {rgb.size[0]}x{rgb.size[1]}")
        for scale in (1, 2):
            img = rgb if scale == 1 else rgb.resize((rgb.size[0] // 2, rgb.size[1] // 2), Image.LANCZOS)
            for q in (75, 90, 95):
                for sub, tag in ((2, "420"), (1, "422"), (0, "444")):
                    out = os.path.join(a.out, "photos", f"{name}_s{scale}_q{q}_{tag}.jpg")
                    img.save(out, "JPEG", quality=q, subsampling=sub)
    with open(os.path.join(a.out, "SOURCES.txt"), "w") as f:
        f.write("\n".join(used) + "\n")
    n = len(glob.glob(os.path.join(a.out, "photos", "*.jpg")))
    print(f"# photo_set: {len(used)} photographs -> {n} JPEGs in {a.out}/photos")
    for u in used:
        print(f"#   {u}")
    if len(used) < a.min_photos:
        print(f"photo_set: only {len(used)} photographs found (scikit-image or matplotlib with its sample data, "
              f"or --src DIR); need {a.min_photos}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
