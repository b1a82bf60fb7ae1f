"""beta of the increments estimator on simulated diffusions observed every dt: the one-step value, the continuous
reading ``beta_continuous`` (local linearisation, fpirl.estimators._time_step_beta) and whether beta's interval covers
the truth, through ``fpirl fit`` with its defaults.

Run:  PYTHONPATH=src python benchmarks/bench_track_time_step.py [NAME ...]

Data: Euler-Maruyama with 20 substeps per observation interval (``fpirl.forward.markov.sample_sde``), 300 tracks
started uniformly and burnt in for 2 time units, then 100-300 observations; twelve potentials and intervals
(periodic sine-cosine sums and von Mises bumps, walled double well, anisotropic quadratics, Gaussian wells),
``lambda dt`` up to 0.09.
"""
import sys, subprocess, tempfile, warnings

import numpy as np
import pandas as pd
warnings.simplefilter("ignore")
from fpirl.forward.markov import sample_sde  # noqa: E402
from fpirl.io import read_result
out = tempfile.mkdtemp()
pi = np.pi


def sincos(a=0.5,b=0.35,c=0.2,L=(2,2)):
    k=[2*pi/l for l in L]
    def psi(P):
        x,y=P[...,0],P[...,1]; return a*np.sin(k[0]*x)+b*np.cos(k[1]*y)+c*np.cos(k[0]*x+k[1]*y)
    def grad(P):
        x,y=P[...,0],P[...,1]; m=-c*np.sin(k[0]*x+k[1]*y)
        return np.stack([a*k[0]*np.cos(k[0]*x)+m*k[0], -b*k[1]*np.sin(k[1]*y)+m*k[1]],-1)
    return psi,grad


def dwell(xc=1.5, s=1.0, h=1.0, tilt=0.3, ky=2.0):
    # x in [xc-1.5s, xc+1.5s]: h*(u^2-1)^2 + tilt*u, u=(x-xc)/s ; + ky/2 y^2
    def psi(P):
        u=(P[...,0]-xc)/s; y=P[...,1]; return h*(u**2-1)**2+tilt*u+0.5*ky*y**2
    def grad(P):
        u=(P[...,0]-xc)/s; y=P[...,1]
        return np.stack([(4*h*u*(u**2-1)+tilt)/s, ky*y],-1)
    return psi,grad


def gauss(centres, amps, widths):
    centres=np.array(centres,float); 
    def psi(P):
        out=0
        for c,a,w in zip(centres,amps,widths):
            out=out - a*np.exp(-np.sum((P-c)**2,-1)/(2*w**2))
        return out
    def grad(P):
        out=0
        for c,a,w in zip(centres,amps,widths):
            e=np.exp(-np.sum((P-c)**2,-1)/(2*w**2))
            out=out + (a*e/w**2)[...,None]*(P-c)
        return out
    return psi,grad


def vmgauss(L, centres, amps, kappas):  # periodic bumps
    L=np.array(L,float); centres=np.array(centres,float)
    def psi(P):
        out=0
        for c,a,k in zip(centres,amps,kappas):
            out=out - a*np.exp(k*np.sum(np.cos(2*pi*(P-c)/L)-1,-1))
        return out
    def grad(P):
        out=0
        for c,a,k in zip(centres,amps,kappas):
            e=np.exp(k*np.sum(np.cos(2*pi*(P-c)/L)-1,-1))
            out=out + (a*e*k)[...,None]*(2*pi/L)*np.sin(2*pi*(P-c)/L)
        return out
    return psi,grad


def aniso(K, c=None):
    K=np.array(K,float)
    def psi(P):
        Q=P-(0 if c is None else np.array(c)); return 0.5*np.einsum('...i,ij,...j->...',Q,K,Q)
    def grad(P):
        Q=P-(0 if c is None else np.array(c)); return Q@K.T
    return psi,grad


C = [  # name, pot, lo, hi, bc, beta, dt, n, steps
 ("sc_p_005", lambda: sincos(L=(2,2)), [-1,-1],[1,1],'periodic',4,0.005,300,150),
 ("sc_p_02", lambda: sincos(L=(2,2)), [-1,-1],[1,1],'periodic',4,0.02,300,150),
 ("sc_p_b1", lambda: sincos(L=(2,2)), [-1,-1],[1,1],'periodic',1,0.01,300,150),
 ("vm_p", lambda: vmgauss([3,2],[[0.5,0.5],[2,1.4]],[1.5,1.0],[1.0,1.5]), [0,0],[3,2],'periodic',3,0.01,300,150),
 ("dw_w_01", lambda: dwell(), [0,-1],[3,1],'reflecting',3,0.01,300,150),
 ("dw_w_002", lambda: dwell(), [0,-1],[3,1],'reflecting',3,0.002,300,300),
 ("aq_w", lambda: aniso([[2,0.6],[0.6,1]]), [-3,-3],[3,3],'reflecting',8,0.01,300,150),
 ("aq_w_05", lambda: aniso([[2,0.6],[0.6,1]]), [-3,-3],[3,3],'reflecting',8,0.05,300,100),
 ("ga_w", lambda: gauss([[-0.8,-0.6],[0.9,0.8]],[2.0,1.5],[0.6,0.7]), [-2,-2],[2,2],'reflecting',2,0.01,300,150),
 ("ga_w_03", lambda: gauss([[-0.8,-0.6],[0.9,0.8]],[2.0,1.5],[0.6,0.7]), [-2,-2],[2,2],'reflecting',2,0.03,300,100),
 ("aq_tight", lambda: aniso([[6,0],[0,3]]), [-1.5,-1.5],[1.5,1.5],'reflecting',5,0.02,300,100),
 ("sc_p_hot", lambda: sincos(a=1.0,b=0.7,c=0.4,L=(2,2)), [-1,-1],[1,1],'periodic',6,0.01,300,150),
]
only = sys.argv[1:]
rows = []
for name, pot, lo, hi, bc, beta, dt, n, steps in C:
    if only and name not in only: continue
    psi, grad = pot(); rng = np.random.default_rng(11)
    lo_, hi_ = np.array(lo, float), np.array(hi, float)
    x0 = rng.uniform(lo_, hi_, (n, 2))
    burn = sample_sde(grad, beta, x0, dt, int(2.0/dt), rng, lo_, hi_, bc, substeps=20)
    P = sample_sde(grad, beta, burn[-1], dt, steps, rng, lo_, hi_, bc, substeps=20)
    F, N, _ = P.shape
    df = pd.DataFrame({'id': np.tile(np.arange(N), F), 't': np.repeat(dt*np.arange(F), N), 'x': P[...,0].ravel(), 'y': P[...,1].ravel()})
    f = f'{out}/{name}.csv'; df.to_csv(f, index=False, float_format='%.7g')
    bnd = ["--boundary", bc] + (["--bounds", f"{lo[0]}:{hi[0]},{lo[1]}:{hi[1]}"] if bc == 'periodic' else [])
    r = subprocess.run([sys.executable, '-m', 'fpirl.cli', 'fit', f, '--track', 'id', '--time', 't', '--state', 'x,y', *bnd, '-o', f'{out}/{name}.nc', '--no-progress'], capture_output=True, text=True)
    if r.returncode: print(name, "FAILED", r.stderr[-300:]); continue
    ds = read_result(f'{out}/{name}.nc')
    b = float(ds.attrs['beta']); lo_b, hi_b = float(ds.attrs['beta_lower']), float(ds.attrs['beta_upper']); b1 = ds.attrs.get('beta_continuous')
    cov = lo_b <= beta <= hi_b
    rows.append((100*(b/beta-1), 100*(float(b1)/beta-1), cov, cov))
    print(f"| {name} | {beta} | {dt} | {100*(b/beta-1):+.2f}% | {100*(float(b1)/beta-1):+.2f}% | [{lo_b:.3f}, {hi_b:.3f}] | {'covers' if cov else 'MISSES'} |", flush=True)
a = np.array([r[:2] for r in rows]); c = np.array([r[2:] for r in rows])
print("mean |error|: one-step beta %.2f%%, beta_continuous %.2f%%; intervals covering the truth %d/%d" % (np.abs(a[:,0]).mean(), np.abs(a[:,1]).mean(), c[:,0].sum(), len(c)))
