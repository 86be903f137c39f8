# rocmcheck in a container, on top of the PyTorch stack it is meant to check.
#
# BASE_IMAGE default: AMD's validated ROCm 7.2.4 + PyTorch 2.9.1 image (Ubuntu 24.04, Python 3.12).
# ROCm 7.2.x supports gfx942 (MI300X / MI300A / MI325X), AMD lists PyTorch 2.9.1 for ROCm 7.2.1-7.2.4,
# and this is the tag AMD's PyTorch install page names for ROCm 7.2.4:
#   https://rocm.docs.amd.com/projects/install-on-linux/en/latest/install/3rd-party/pytorch-install.html
#   https://github.com/ROCm/legacy-rocm-build/blob/fff7efbd0c870e1bfba278faa91d517996b7a33a/docs/compatibility/compatibility-matrix.rst
# NVIDIA: the same file builds on a CUDA PyTorch image, e.g.
#   docker build --build-arg BASE_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime -t rocmcheck:cuda .
# Any base works whose `python3` has pip (torch is optional: doctor reports it missing).
ARG BASE_IMAGE=rocm/pytorch:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.9.1
FROM ${BASE_IMAGE}
ARG BASE_IMAGE
LABEL org.opencontainers.image.title="rocmcheck" \
      org.opencontainers.image.description="Can this machine fine-tune LLaMA-class models on ROCm (or CUDA)?" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

COPY . /tmp/rocmcheck-src

# The base image's torch must survive: pip may never swap a ROCm (or CUDA) torch for another wheel.
# keep_torch.py pins every torch-family distribution to its installed version (or forbids it when
# absent) as pip constraints, so the resolver fails rather than replace one; it checks afterwards.
# rocmcheck itself depends on no torch: its core deps are click, rich, packaging, distro, pyyaml.
RUN python3 /tmp/rocmcheck-src/docker/keep_torch.py snapshot /tmp/torch-pins.txt \
 && PIP_CONSTRAINT=/tmp/torch-pins.txt python3 -m pip install --no-cache-dir /tmp/rocmcheck-src \
 && python3 /tmp/rocmcheck-src/docker/keep_torch.py verify /tmp/torch-pins.txt \
 && rm -rf /tmp/rocmcheck-src /tmp/torch-pins.txt

ENTRYPOINT ["rocmcheck"]
CMD ["doctor"]
